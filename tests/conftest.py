"""Shared test set-up. Database fixtures come from the toki pytest plugin (properties/); the
Hypothesis profiles (dev, ci, paper) from toki.properties.profiles: $TOKI_HYPOTHESIS_PROFILE,
else ci when $CI is set, else dev; ``--toki-profile`` overrides."""

from toki.properties.profiles import load_profile

load_profile()
