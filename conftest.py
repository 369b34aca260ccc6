"""Hypothesis settings for every test directory (this file sits at the rootdir, so pytest loads
it for ``tests/``, ``backends/*/tests`` and ``conformance_tests/tests`` alike).

``HYPOTHESIS_PROFILE=ci`` (set by ``.ci/run``) reports a failing example as found, with the blob
that replays it (``@reproduce_failure``), instead of shrinking it: shrinking a store test opens
and fills thousands of stores, and once grew the CI process to 26 GB, so the PostgreSQL test
server could no longer fork and hundreds of unrelated tests errored. Locally the default profile
shrinks as usual; replay a CI failure with the printed blob or ``--hypothesis-seed``.

The CI profile is also derandomized: each property test draws the same examples on every CI run,
so whether a commit lands does not depend on the draw (stop 42's submission was refused by a
monotonicity bug in the token estimate that a random draw happened to find there and in no
earlier run). Random exploration happens wherever tests run without the profile (every local
run), and any example it finds is pinned with ``@example``.
"""

from __future__ import annotations

import os

from hypothesis import Phase, settings

settings.register_profile(
    "ci",
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.explain],
    print_blob=True,
    derandomize=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
