"""Test utilities shipped with the package: a scripted OpenAI-compatible server."""

from .scripted_server import ScriptedServer

__all__ = ["ScriptedServer"]
