"""The ``agentmemory`` command: ``agentmemory plugins`` prints installed plugins as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from .plugins import get_plugin_manager


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentmemory`` command."""
    parser = argparse.ArgumentParser(prog="agentmemory", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("plugins", help="list plugins, backends, embedders, … as JSON")
    sub.add_parser("demo", help="play the seed scenarios on the embedded default")
    args = parser.parse_args(argv)
    if args.command == "plugins":
        json.dump(get_plugin_manager().report(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    from .demo import main as demo_main

    return demo_main()


if __name__ == "__main__":
    sys.exit(main())
