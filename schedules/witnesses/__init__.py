"""Schedule files (TOML) shipped as package data; see schedules/README in the repository README."""
