"""Code that runs inside the sandbox (shipped as the neutral package `_eginside`)."""
