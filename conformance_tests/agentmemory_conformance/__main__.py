"""``python -m agentmemory_conformance report|combine``: the compliance matrix (``matrix.py``)."""

from __future__ import annotations

import sys

from .matrix import main

sys.exit(main())
