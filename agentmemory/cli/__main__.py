"""``python -m agentmemory.cli``."""

import sys

from . import main

sys.exit(main())
