"""Engine plug-ins for third-party libraries that no one in toki wrote, each written as a new user
would write one from docs/engines.md ("Plugging in your own engine"): a racy use of the library and
a fixed one, certified by tests/test_harness_thirdparty.py. ``broken`` and ``broken_*`` are
plug-ins with mistakes in them, for the harness's bad-input tests."""
