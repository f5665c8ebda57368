#!/usr/bin/env bash
# GPU check (issue 16), at most 10 minutes on a GPU machine with no network:
#   1. a random-initialized model with Qwen3-8B's shape, from its published configuration (no weights are
#      downloaded: the shape is written below), with a small BPE tokenizer learnt from our export;
#   2. LLaMA-Factory full SFT with DeepSpeed ZeRO-3 (the paper's recipe, bf16) for a few steps on exported
#      EvoSyn data: tokens/s and peak GPU memory;
#   3. the checkpoint served with vLLM (--enable-auto-tool-choice --tool-call-parser hermes, as a round serves
#      it) and its generation throughput (concurrent requests, tokens/s).
# Figures: printed, and written to $OUT/gpu_check.json (OUT defaults to the work folder).
#
# Needs, on that machine: nvidia-smi, and a Python (EVOSYN_TRAIN_PYTHON, default python3) with torch (CUDA),
# llamafactory==0.9.5, deepspeed and vllm. Data: GPU_CHECK_DATA, a folder with a ShareGPT export
# (`evosyn export --format sharegpt`: evosyn.json + dataset_info.json), else one made here with `evosyn` if
# it is installed. With fewer than 4 GPUs the optimizer state is offloaded to CPU (full SFT of 8B parameters
# needs ~128 GB for weights, gradients and Adam state before activations; ZeRO-3 splits it across GPUs).
#
# Knobs: GPU_CHECK_STEPS (5), GPU_CHECK_CUTOFF (4096), GPU_CHECK_LAYERS (36: Qwen3-8B), GPU_CHECK_DIR,
# GPU_CHECK_OFFLOAD (auto|yes|no), GPU_CHECK_REQUESTS (64), GPU_CHECK_MAX_TOKENS (256).
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
PY=${EVOSYN_TRAIN_PYTHON:-python3}
WORK=${GPU_CHECK_DIR:-$(mktemp -d)}
OUT=${OUT:-$WORK}
STEPS=${GPU_CHECK_STEPS:-5}
CUTOFF=${GPU_CHECK_CUTOFF:-4096}
LAYERS=${GPU_CHECK_LAYERS:-36}
REQUESTS=${GPU_CHECK_REQUESTS:-64}
MAX_TOKENS=${GPU_CHECK_MAX_TOKENS:-256}
mkdir -p "$WORK" "$OUT"
export HF_HUB_OFFLINE=1 DISABLE_VERSION_CHECK=1 WANDB_DISABLED=true TOKENIZERS_PARALLELISM=false

say() { printf '[gpu_check %3ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 2; }

# ---------------------------------------------------------------- preflight
command -v nvidia-smi >/dev/null || fail "no nvidia-smi: this check runs on a GPU machine"
GPUS=$(nvidia-smi -L | grep -c '^GPU ' || true)
[ "$GPUS" -gt 0 ] || fail "nvidia-smi lists no GPU"
"$PY" - <<'EOF' || fail "EVOSYN_TRAIN_PYTHON=$PY lacks a package above (install torch with CUDA, llamafactory==0.9.5, deepspeed, vllm)"
import importlib, sys
missing = [m for m in ("torch", "llamafactory", "deepspeed", "vllm", "transformers", "tokenizers")
           if importlib.util.find_spec(m) is None]
if missing:
    print("missing:", ", ".join(missing)); sys.exit(1)
import torch
assert torch.cuda.is_available(), "torch sees no CUDA device"
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())
EOF
BIN=$(dirname "$(command -v "$PY")")
LFCLI=${EVOSYN_LLAMAFACTORY_CLI:-$BIN/llamafactory-cli}
VLLM=${EVOSYN_VLLM_CLI:-$BIN/vllm}
[ -x "$LFCLI" ] || fail "no llamafactory-cli at $LFCLI (set EVOSYN_LLAMAFACTORY_CLI)"
[ -x "$VLLM" ] || fail "no vllm at $VLLM (set EVOSYN_VLLM_CLI)"
say "$GPUS GPU(s): $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"

# ---------------------------------------------------------------- data
DATA=${GPU_CHECK_DATA:-}
if [ -z "$DATA" ]; then
  command -v evosyn >/dev/null || fail "set GPU_CHECK_DATA to a ShareGPT export folder (evosyn is not installed here)"
  evosyn --home "$WORK/h" synth --n 80 --seed 1 >/dev/null   # the default domain pack
  RUN=$(evosyn --home "$WORK/h" query "select distinct run_id from sft_examples" --format csv | tail -n 1 | tr -d '"')
  evosyn --home "$WORK/h" export --run "$RUN" --format sharegpt --output "$WORK/data"
  DATA=$WORK/data
fi
if [ ! -f "$DATA/evosyn.json" ] || [ ! -f "$DATA/dataset_info.json" ]; then
  fail "GPU_CHECK_DATA=$DATA has no evosyn.json + dataset_info.json"
fi
say "data: $("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$DATA/evosyn.json") examples in $DATA"

# ---------------------------------------------------------------- 1. the model: Qwen3-8B's shape, random weights
timeout 150 "$PY" - "$WORK/base" "$DATA/evosyn.json" "$LAYERS" <<'EOF'
import json, sys, time
from pathlib import Path
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

out, data, layers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
rows = json.loads(data.read_text())
texts = [t["value"] for r in rows for t in r["conversations"]] + [rows[0]["system"], rows[0]["tools"]]
special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
           "<tool_response>", "</tool_response>"]
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8000, special_tokens=special,
                                                   initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                               additional_special_tokens=special[1:])
fast.save_pretrained(out)
# Qwen3-8B's published config.json (Qwen/Qwen3-8B): only the token ids follow our tokenizer
cfg = Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=layers,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=128, hidden_act="silu",
                  max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0, attention_bias=False,
                  tie_word_embeddings=False, use_sliding_window=False, max_window_layers=36,
                  bos_token_id=fast.convert_tokens_to_ids("<|endoftext|>"), eos_token_id=fast.eos_token_id,
                  pad_token_id=fast.pad_token_id, torch_dtype="bfloat16")
t0 = time.time()
with torch.device("cuda"):
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
n = sum(p.numel() for p in model.parameters())
model.save_pretrained(out, safe_serialization=True, max_shard_size="5GB")
print(f"model: {n / 1e9:.2f}B parameters ({layers} layers), built and saved in {time.time() - t0:.0f}s")
json.dump({"parameters": n, "layers": layers}, open(out / "evosyn_shape.json", "w"))
EOF
say "model built in $WORK/base"

# ---------------------------------------------------------------- 2. full SFT, ZeRO-3
OFFLOAD=${GPU_CHECK_OFFLOAD:-auto}
if [ "$OFFLOAD" = auto ]; then OFFLOAD=$([ "$GPUS" -lt 4 ] && echo yes || echo no); fi
"$PY" - "$WORK" "$DATA" "$STEPS" "$CUTOFF" "$OFFLOAD" <<'EOF'
import importlib.util, json, sys
from pathlib import Path
import yaml
work, data, steps, cutoff, offload = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ds = json.loads(Path("agents/learners/ds_z3_config.json").read_text())
if offload == "yes":
    ds["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
(work / "ds_z3.json").write_text(json.dumps(ds, indent=2))
# the paper's recipe (agents/learners/llamafactory.py PAPER_RECIPE), a few steps
cfg = {"model_name_or_path": str(work / "base"), "dataset": "evosyn", "dataset_dir": data,
       "output_dir": str(work / "ckpt"), "stage": "sft", "do_train": True, "finetuning_type": "full",
       "template": "qwen3", "cutoff_len": cutoff, "max_steps": steps, "learning_rate": 1.0e-5,
       "lr_scheduler_type": "cosine", "warmup_ratio": 0.1, "bf16": True,
       "flash_attn": "fa2" if importlib.util.find_spec("flash_attn") else "sdpa",
       "per_device_train_batch_size": 1, "gradient_accumulation_steps": 2, "logging_steps": 1,
       "save_strategy": "no", "overwrite_output_dir": True, "preprocessing_num_workers": 8, "report_to": "none",
       "deepspeed": str(work / "ds_z3.json"), "include_effective_tokens_per_second": True, "plot_loss": False}
(work / "sft.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
print("recipe:", work / "sft.yaml", "flash_attn", cfg["flash_attn"], "offload_optimizer", offload)
EOF
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$WORK/train-mem.csv" &
SMI=$!
set +e
FORCE_TORCHRUN=1 timeout 270 "$LFCLI" train "$WORK/sft.yaml" >"$WORK/train.log" 2>&1
TRAIN_RC=$?
set -e
kill "$SMI" 2>/dev/null || true
[ "$TRAIN_RC" = 0 ] || { tail -n 30 "$WORK/train.log" >&2; fail "llamafactory-cli train exited $TRAIN_RC (log: $WORK/train.log)"; }
say "trained $STEPS steps"

# ---------------------------------------------------------------- 3. vLLM: serve and measure generation
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$WORK/serve-mem.csv" &
SMI=$!
"$VLLM" serve "$WORK/ckpt" --host 127.0.0.1 --port "$PORT" --served-model-name checkpoint \
  --enable-auto-tool-choice --tool-call-parser hermes --max-model-len 8192 --enforce-eager \
  >"$WORK/serve.log" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" "$SMI" 2>/dev/null || true; }
trap cleanup EXIT
up() { "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=3)' \
         "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; }
for _ in $(seq 1 120); do
  up && break
  kill -0 "$SERVER" 2>/dev/null || { tail -n 30 "$WORK/serve.log" >&2; fail "vllm serve exited (log: $WORK/serve.log)"; }
  sleep 1
done
up || fail "vllm did not answer within 120s (log: $WORK/serve.log)"
say "vLLM serving on 127.0.0.1:$PORT"
timeout 60 "$PY" - "$PORT" "$REQUESTS" "$MAX_TOKENS" "$DATA/evosyn.json" "$WORK/generation.json" <<'EOF'
import asyncio, json, sys, time
from openai import AsyncOpenAI
port, n, max_tokens, data, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
row = json.load(open(data))[0]
tools = json.loads(row["tools"])
client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="EMPTY")
messages = [{"role": "system", "content": row["system"]}, {"role": "user", "content": row["conversations"][0]["value"]}]

async def one():
    r = await client.chat.completions.create(model="checkpoint", messages=messages, tools=tools, max_tokens=max_tokens,
                                             temperature=0.0, extra_body={"ignore_eos": True})
    return r.usage.completion_tokens, r.usage.prompt_tokens

async def main():
    await one()  # warm-up
    t0 = time.perf_counter()
    done = await asyncio.gather(*(one() for _ in range(n)))
    s = time.perf_counter() - t0
    gen = sum(d[0] for d in done)
    res = {"requests": n, "seconds": s, "completion_tokens": gen, "prompt_tokens_each": done[0][1],
           "generation_tokens_per_s": gen / s}
    json.dump(res, open(out, "w"))
    print(f"generation: {n} concurrent requests, {gen} tokens in {s:.1f}s = {gen / s:.0f} tokens/s "
          f"(prompt {done[0][1]} tokens each)")
asyncio.run(main())
EOF
cleanup
trap - EXIT

# ---------------------------------------------------------------- figures
"$PY" - "$WORK" "$OUT/gpu_check.json" "$GPUS" "$OFFLOAD" "$((SECONDS - START))" <<'EOF'
import json, sys
from pathlib import Path
work, out, gpus, offload, seconds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
def peak(f):
    vals = [int(v) for line in (work / f).read_text().splitlines() for v in line.split(",") if v.strip().isdigit()]
    return max(vals) if vals else None
train = json.loads((work / "ckpt" / "train_results.json").read_text())
res = {"gpus": gpus, "offload_optimizer": offload, "shape": json.loads((work / "base" / "evosyn_shape.json").read_text()),
       "train": {k: train.get(k) for k in ("train_runtime", "train_steps_per_second", "train_samples_per_second",
                                           "effective_tokens_per_sec", "train_loss")},
       "train_peak_gpu_mib": peak("train-mem.csv"), "serve_peak_gpu_mib": peak("serve-mem.csv"),
       "generation": json.loads((work / "generation.json").read_text()), "seconds": seconds}
out.write_text(json.dumps(res, indent=2))
t = res["train"]
print(f"SFT: {t['effective_tokens_per_sec']} tokens/s (effective), {t['train_runtime']}s for the steps, "
      f"peak GPU memory {res['train_peak_gpu_mib']} MiB (offload_optimizer: {offload})")
print(f"vLLM: {res['generation']['generation_tokens_per_s']:.0f} generated tokens/s, peak GPU memory "
      f"{res['serve_peak_gpu_mib']} MiB; total {seconds}s; figures in {out}")
EOF
