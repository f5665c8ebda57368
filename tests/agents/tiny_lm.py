"""Build a tiny Qwen3-style causal LM and tokenizer locally (no hub): random weights, a BPE vocabulary of 2000
learnt from a ShareGPT export's texts (its system prompt and tools too, so the served prompt takes fewer tokens)."""
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

out = Path(sys.argv[1]); data = Path(sys.argv[2])
rows = json.loads(data.read_text())
texts = [t["value"] for row in rows for t in row["conversations"]] + [row["system"] + row["tools"] for row in rows[:1]]
special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
           "<tool_response>", "</tool_response>"]
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, special_tokens=special,
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                               additional_special_tokens=special[1:])
fast.save_pretrained(out)
cfg = Qwen3Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=32768,
                  eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=True)
Qwen3ForCausalLM(cfg).save_pretrained(out)
print("tiny model", out, len(fast))
