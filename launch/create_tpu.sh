#!/usr/bin/env bash
# Creates a Cloud TPU VM (single host, e.g. v4-8) or pod slice (several hosts, e.g. v4-32, v5litepod-64).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: launch/create_tpu.sh --name NAME --zone ZONE --accelerator-type TYPE [options] [-- EXTRA_GCLOUD_ARGS...]

Creates a Cloud TPU VM or pod slice:
  gcloud compute tpus tpu-vm create NAME --zone=ZONE --accelerator-type=TYPE --version=RUNTIME
         [--project=PROJECT] [--spot | --preemptible] [EXTRA_GCLOUD_ARGS...]

Required:
  --name NAME               TPU node name (lowercase letters, digits, hyphens)
  --zone ZONE               e.g. us-central2-b (v4), us-west4-a (v5e); the type must be offered there
  --accelerator-type TYPE   e.g. v4-8 (1 host), v4-32 (4 hosts), v5litepod-64 (16 hosts)

Options:
  --runtime-version V       TPU software version; default by family:
                              v2/v3/v4 -> tpu-ubuntu2204-base, v5litepod -> v2-alpha-tpuv5-lite,
                              v5p -> v2-alpha-tpuv5, v6e -> v2-alpha-tpuv6e
  --project PROJECT         Google Cloud project (default: gcloud's core/project)
  --spot                    Spot capacity (cheaper, can be preempted at any time)
  --preemptible             legacy preemptible capacity (at most 24 h); exclusive with --spot
  --dry-run                 print the gcloud command instead of running it (also DRY_RUN=1)
  -h, --help                this help
Everything after "--" is passed to gcloud unchanged (e.g. -- --network=my-net --labels=team=nlu).
EOF
}

# shellcheck source=launch/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ACCEL=""
RUNTIME=""
SPOT=0
PREEMPTIBLE=0
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --accelerator-type | --accelerator-type=*)
      opt_value "$@"
      ACCEL=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --runtime-version | --runtime-version=* | --version | --version=*)
      opt_value "$@"
      RUNTIME=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --spot)
      SPOT=1
      shift
      ;;
    --preemptible)
      PREEMPTIBLE=1
      shift
      ;;
    --)
      shift
      EXTRA=("$@")
      break
      ;;
    *)
      parse_common_opt_or_die "$@"
      shift "${COMMON_SHIFT}"
      ;;
  esac
done

check_common_opts
require_opt --accelerator-type "${ACCEL}"
if [[ "${SPOT}" == 1 && "${PREEMPTIBLE}" == 1 ]]; then
  die_usage "--spot and --preemptible are exclusive"
fi

if [[ -z "${RUNTIME}" ]]; then
  case "${ACCEL}" in
    v2-* | v3-* | v4-*) RUNTIME=tpu-ubuntu2204-base ;;
    v5litepod-* | v5e-*) RUNTIME=v2-alpha-tpuv5-lite ;;
    v5p-*) RUNTIME=v2-alpha-tpuv5 ;;
    v6e-*) RUNTIME=v2-alpha-tpuv6e ;;
    *) die_usage "no default runtime for --accelerator-type ${ACCEL}; pass --runtime-version" ;;
  esac
fi

ARGS=("--accelerator-type=${ACCEL}" "--version=${RUNTIME}")
if [[ "${SPOT}" == 1 ]]; then
  ARGS+=(--spot)
fi
if [[ "${PREEMPTIBLE}" == 1 ]]; then
  ARGS+=(--preemptible)
fi

tpu_cmd create "${ARGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
