"""Prompt templates of the LLM-backed roles (``string.Template`` syntax: ``$name``)."""
