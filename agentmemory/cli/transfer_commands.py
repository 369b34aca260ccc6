"""Transfer commands: export, import, migrate (see ``cli``)."""
