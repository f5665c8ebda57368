"""Load an export through LLaMA-Factory's own data loader and chat template (run in the [train] environment).

argv: DATASET_DIR DATASET_NAME TOKENIZER_DIR TEMPLATE OUT_JSON. Writes one row per example the loader
returned: whether it kept it (an "abnormal example" comes back with an empty prompt and response), its
system prompt and tools as aligned, its roles, and the training text the template renders from it.
"""
import json
import sys
import tempfile
from pathlib import Path

from llamafactory.data.loader import _get_merged_dataset
from llamafactory.data.template import get_template_and_fix_tokenizer
from llamafactory.hparams import DataArguments, ModelArguments
from transformers import AutoTokenizer, Seq2SeqTrainingArguments

dataset_dir, name, tokenizer_dir, template_name, out = sys.argv[1:6]
model_args = ModelArguments(model_name_or_path=tokenizer_dir)
data_args = DataArguments(dataset_dir=dataset_dir, dataset=name, template=template_name, overwrite_cache=True)
training_args = Seq2SeqTrainingArguments(output_dir=tempfile.mkdtemp())
dataset = _get_merged_dataset(data_args.dataset, model_args, data_args, training_args, "sft")
tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
template = get_template_and_fix_tokenizer(tokenizer, data_args)
rows = []
for ex in dataset:
    messages = ex["_prompt"] + ex["_response"]
    kept = bool(ex["_prompt"]) and bool(ex["_response"])
    pairs = template.encode_multiturn(tokenizer, messages, ex["_system"], ex["_tools"]) if kept else []
    text = tokenizer.decode([t for pair in pairs for part in pair for t in part])
    rows.append({"kept": kept, "system": ex["_system"], "tools": ex["_tools"],
                 "roles": [m["role"] for m in messages], "text": text})
Path(out).write_text(json.dumps(rows))
print(f"loaded {len(rows)} rows of {name}")
