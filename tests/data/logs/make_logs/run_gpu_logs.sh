#!/usr/bin/env bash
# On a GPU host: produce Lightning and Hugging Face logs on the GPU, parse them with
# `gpuherd parse`, and run the CUDA OOM finding test. Everything lands in ${OUT:-gpu_logs}.
# Run from the repository root. Missing libraries are reported and skipped.
set -u
OUT=${OUT:-gpu_logs}
mkdir -p "$OUT"
HERE=tests/data/logs/make_logs
export GEN_ACCELERATOR=gpu
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1

run() {  # name, command...
    local name=$1; shift
    echo "== $name" | tee -a "$OUT/summary.txt"
    "$@" > "$OUT/$name.log" 2>&1
    echo "exit $?" | tee -a "$OUT/summary.txt"
    python -m gpuherd parse --json "$OUT/$name.log" > "$OUT/$name.parsed.jsonl" 2>> "$OUT/summary.txt"
    python -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; \
print(sys.argv[1], len([x for x in r if 'metric' in x]), 'metric values', \
sorted({x['metric'] for x in r if 'metric' in x}), [x['finding'] for x in r if 'finding' in x])" \
        "$OUT/$name.parsed.jsonl" | tee -a "$OUT/summary.txt"
}

run lightning_tqdm python "$HERE/gen_lightning.py" tqdm "$OUT/pl_tqdm"
run lightning_rich python "$HERE/gen_lightning.py" rich "$OUT/pl_rich"
for csv in "$OUT"/pl_tqdm/lightning_logs/version_*/metrics.csv; do
    python -m gpuherd parse --json "$csv" > "$OUT/lightning_csv.parsed.jsonl" 2>> "$OUT/summary.txt"
done
if python -c "import accelerate" 2>/dev/null; then
    GEN_ACCELERATOR=cuda run hf_trainer python "$HERE/gen_hf_trainer.py" "$OUT/hf" notqdm
    for state in "$OUT"/hf/checkpoint-*/trainer_state.json; do
        python -m gpuherd parse --json "$state" > "$OUT/trainer_state.parsed.jsonl"
    done
else
    echo "accelerate not installed: Trainer run skipped" | tee -a "$OUT/summary.txt"
fi
python -m pytest tests/gpu/test_oom_finding.py -m gpu -q -rs > "$OUT/oom_test.txt" 2>&1
tail -3 "$OUT/oom_test.txt" | tee -a "$OUT/summary.txt"
