"""Two GRPO steps (TRL) on CPU against an exported EvoSyn environment, with a tiny random Qwen2 model built here.

Run by test_rl_grpo.py in the RL environment (EVOSYN_RL_PYTHON: torch CPU + evosyn[rl]):
``python grpo_smoke.py EXPORT_DIR OUT_DIR``. Loads the environment through the exported package's own
``load_environment`` (EXPORT_DIR on the path, not installed), trains on ``evosyn.tasks.exports.grpo``'s rewards, and
writes OUT_DIR/rewards.jsonl (each scored completion) and OUT_DIR/result.json (TRL's log history, global step).
No hub access: the tokenizer is a byte-level BPE learnt from the prompts, the model random.
"""
import importlib
import json
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOConfig, GRPOTrainer

from evosyn.tasks.exports.grpo import grpo_dataset, reward_funcs, reward_weights

t0 = time.perf_counter()
export, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
(package,) = [p.parent.name for p in export.glob("*/tasks.jsonl")]
sys.path.insert(0, str(export))
env = importlib.import_module(package).load_environment()
train = grpo_dataset(env)

# a vocabulary learnt from the prompts: the airline policy and the tools take ~3k tokens instead of ~11k bytes
special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator([m["content"] for p in train["prompt"] for m in p],
                        trainers.BpeTrainer(vocab_size=1000, special_tokens=special,
                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                    pad_token="<|endoftext|>", padding_side="left")
tokenizer.chat_template = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
torch.manual_seed(0)
model = Qwen2ForCausalLM(Qwen2Config(
    vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
    num_key_value_heads=1, max_position_embeddings=16384, bos_token_id=tokenizer.bos_token_id,
    eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True))

args = GRPOConfig(output_dir=str(out / "trainer"), use_cpu=True, max_steps=2, per_device_train_batch_size=4,
                  num_generations=2, max_completion_length=16, logging_steps=1, report_to=[], save_strategy="no",
                  learning_rate=1e-3, bf16=False, fp16=False, temperature=1.0, seed=0,
                  reward_weights=reward_weights())
trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs(env, record=out / "rewards.jsonl"), args=args,
                      train_dataset=train, processing_class=tokenizer)
trainer.train()
(out / "result.json").write_text(json.dumps({"global_step": trainer.state.global_step,
                                             "log_history": trainer.state.log_history,
                                             "seconds": time.perf_counter() - t0}))
print(f"grpo smoke: {trainer.state.global_step} steps in {time.perf_counter() - t0:.1f}s")
