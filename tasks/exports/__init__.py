"""`evosyn export --format hf`: a run's verified examples as a Hugging Face dataset (hf.py) with its card (hf_card.py).

The other formats (ShareGPT, OpenAI JSONL, tau2 tasks) are the learners' own: agents/learners/exports.py.
"""
