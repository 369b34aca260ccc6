"""Hypothesis settings for every test directory (this file sits at the rootdir, so pytest loads
it for ``tests/``, ``backends/*/tests`` and ``conformance_tests/tests`` alike).

``HYPOTHESIS_PROFILE=ci`` (set by ``.ci/run``) reports a failing example as found, with the blob
that replays it (``@reproduce_failure``), instead of shrinking it: shrinking a store test opens
and fills thousands of stores, and once grew the CI process to 26 GB, so the PostgreSQL test
server could no longer fork and hundreds of unrelated tests errored. Locally the default profile
shrinks as usual; replay a CI failure with the printed blob or ``--hypothesis-seed``.
"""

from __future__ import annotations

import os

from hypothesis import Phase, settings

settings.register_profile(
    "ci",
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.explain],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
