"""The embedded scripted policies and their OpenAI-compatible server (host-side only)."""
