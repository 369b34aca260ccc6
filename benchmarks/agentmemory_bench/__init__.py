"""agentmemory benchmarks: backends vs raw engines vs peers, speed and memory quality.

Run ``agentmemory-bench --help``; the suites live in ``speed``, ``framework``, ``quality`` and
``peers``; ``report`` writes Markdown, JSON and PNG plots.
"""

__version__ = "0.1.0"
