"""Inspect commands: threads, messages, memories, links, search, card, stats (see ``cli``)."""
