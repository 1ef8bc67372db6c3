"""Shared test set-up. Database fixtures come from the toki pytest plugin (properties/)."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, database=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("TOKI_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
