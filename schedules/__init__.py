"""The schedule catalogue (data: TOML and .spec files), installed as ``toki.schedules``; no code
imports it, ``toki run`` reads its files."""
