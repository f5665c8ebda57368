"""Task agents (learners): the embedded policy, an OpenAI-compatible model, and the SFT paths."""
