"""``python -m agentmemory_bench`` = ``agentmemory-bench``."""

import sys

from .cli import main

sys.exit(main())
