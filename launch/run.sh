#!/usr/bin/env bash
# Runs `python -m fewshot_nlu.main` on every worker of a TPU VM / pod slice at once (one JAX process per host).
# shellcheck disable=SC2016  # the single-quoted '$HOME', '$FEWSHOT_NLU_JAX_CACHE' are expanded on the workers.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: launch/run.sh --name NAME --zone ZONE --config CONFIG (--workdir GS_URL | --bucket BUCKET)
                     [options] [-- --config.FIELD=VALUE ...]

On ALL workers at once (gcloud compute tpus tpu-vm ssh NAME --worker=all --command=...), after
launch/setup_workers.sh:
  cd ~/fewshot_nlu && source .venv/bin/activate
  export FEWSHOT_NLU_DATA=~/data FEWSHOT_NLU_JAX_CACHE=~/.cache/fewshot_nlu/jax
  python -m fewshot_nlu.main --config=CONFIG --workdir=GS_URL --config.distributed.enabled=True [OVERRIDES]
         2>&1 | tee -a ~/fewshot_nlu_RUN.log
Every worker logs to its own ~/fewshot_nlu_RUN.log. Re-running the same command resumes from the last
checkpoint in the workdir.

Required:
  --name NAME           TPU node name
  --zone ZONE           its zone
  --config CONFIG       config file, relative to the repository root (e.g. configs/convfit_stage1_reddit.py)
  --workdir GS_URL      run directory shared by all workers (checkpoints, metrics, results), e.g.
                        gs://BUCKET/runs/RUN; or:
  --bucket BUCKET       shorthand for --workdir gs://BUCKET/runs/RUN

Options:
  --run-name RUN        names the log (and the workdir with --bucket); default: the workdir's last
                        component, else the config's file name without .py
  --project PROJECT     Google Cloud project (default: gcloud's core/project)
  --data-dir DIR        FEWSHOT_NLU_DATA on the workers (default ~/data, as in setup_workers.sh)
  --jax-cache DIR       FEWSHOT_NLU_JAX_CACHE, the persistent compilation cache on the workers
                        (default ~/.cache/fewshot_nlu/jax; a gs:// URL is shared by all workers)
  --remote-dir DIR      the code on the workers (default ~/fewshot_nlu)
  --detach              start in the background (nohup) and return; the run survives a dropped
                        connection; follow it with the log command printed at the end
  --dry-run             print the gcloud command instead of running it (also DRY_RUN=1)
  -h, --help            this help
Config overrides: everything after "--" (and any --config.FIELD=VALUE given before it) is passed to
fewshot_nlu.main unchanged, e.g. -- --config.train.max_steps=20000 '--config.name=big run'.
EOF
}

# shellcheck source=launch/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CONFIG=""
WORKDIR=""
BUCKET=""
RUN_NAME=""
DATA_DIR=${DEFAULT_DATA_DIR}
JAX_CACHE=${DEFAULT_JAX_CACHE}
REMOTE_DIR=${DEFAULT_REMOTE_DIR}
DETACH=0
OVERRIDES=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --config.*)
      OVERRIDES+=("$1")
      shift
      ;;
    --config | --config=*)
      opt_value "$@"
      CONFIG=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --workdir | --workdir=*)
      opt_value "$@"
      WORKDIR=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --bucket | --bucket=*)
      opt_value "$@"
      BUCKET=${OPTVAL#gs://}
      BUCKET=${BUCKET%/}
      shift "${OPTSHIFT}"
      ;;
    --run-name | --run-name=*)
      opt_value "$@"
      RUN_NAME=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --data-dir | --data-dir=*)
      opt_value "$@"
      DATA_DIR=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --jax-cache | --jax-cache=*)
      opt_value "$@"
      JAX_CACHE=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --remote-dir | --remote-dir=*)
      opt_value "$@"
      REMOTE_DIR=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --detach)
      DETACH=1
      shift
      ;;
    --)
      shift
      OVERRIDES+=("$@")
      break
      ;;
    *)
      parse_common_opt "$@"
      if [[ "${COMMON_SHIFT}" -eq 0 ]]; then
        die_usage "unknown option: $1 (config overrides go after --)"
      fi
      shift "${COMMON_SHIFT}"
      ;;
  esac
done

check_common_opts
require_opt --config "${CONFIG}"
if [[ -n "${WORKDIR}" && -n "${BUCKET}" ]]; then
  die_usage "give --workdir or --bucket, not both"
fi
if [[ -z "${WORKDIR}" && -z "${BUCKET}" ]]; then
  die_usage "missing required option --workdir (or --bucket)"
fi
if [[ -z "${RUN_NAME}" ]]; then
  if [[ -n "${WORKDIR}" ]]; then
    RUN_NAME=$(basename "${WORKDIR%/}")
  else
    RUN_NAME=$(basename "${CONFIG}" .py)
  fi
fi
if ! [[ "${RUN_NAME}" =~ ^[A-Za-z0-9._-]+$ ]]; then
  die_usage "--run-name '${RUN_NAME}': use letters, digits, '.', '_' and '-'"
fi
if [[ -n "${BUCKET}" ]]; then
  WORKDIR="gs://${BUCKET}/runs/${RUN_NAME}"
fi
if [[ "${WORKDIR}" != gs://* ]]; then
  err "warning: --workdir ${WORKDIR} is not a gs:// URL: on a pod slice every worker must see the same" \
    "checkpoint directory"
fi
if [[ ! -f "${REPO_ROOT}/${CONFIG}" ]]; then
  err "warning: ${CONFIG} is not in this checkout (${REPO_ROOT}); it must exist on the workers"
fi

# shellcheck disable=SC2088  # a path on the workers, expanded there by remote_path.
LOG="~/fewshot_nlu_${RUN_NAME}.log"
LOG_Q=$(remote_path "${LOG}")

MAIN=(python -m fewshot_nlu.main "--config=${CONFIG}" "--workdir=${WORKDIR}" --config.distributed.enabled=True
  ${OVERRIDES[@]+"${OVERRIDES[@]}"})
MAIN_Q=""
for word in "${MAIN[@]}"; do
  MAIN_Q+="${MAIN_Q:+ }$(sq "${word}")"
done

SCRIPT="set -eo pipefail; cd $(remote_path "${REMOTE_DIR}"); source .venv/bin/activate; set -u; "
SCRIPT+="export FEWSHOT_NLU_DATA=$(remote_path "${DATA_DIR}") FEWSHOT_NLU_JAX_CACHE=$(remote_path "${JAX_CACHE}"); "
if [[ "${JAX_CACHE}" != gs://* ]]; then
  SCRIPT+='mkdir -p "$FEWSHOT_NLU_JAX_CACHE"; '
fi
HEADER='echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) $(hostname): fewshot_nlu.main ==="'

if [[ "${DETACH}" == 0 ]]; then
  # tee ignores INT/TERM (a preempted worker's SIGTERM reaches every process: python checkpoints, and its log
  # lines still reach the file) and, with -p, a broken stdout (a dropped ssh connection).
  SCRIPT+="{ ${HEADER}; ${MAIN_Q}; } 2>&1 | (trap '' INT TERM; exec tee -p -a ${LOG_Q})"
  REMOTE="bash -c $(sq "${SCRIPT}")"
else
  SCRIPT="exec >>${LOG_Q} 2>&1; ${SCRIPT}${HEADER}; ${MAIN_Q}"
  REMOTE="nohup bash -c $(sq "${SCRIPT}") >/dev/null 2>&1 </dev/null &"
fi

tpu_ssh_all "${REMOTE}"

PROJECT_FLAG=""
if [[ -n "${PROJECT}" ]]; then
  PROJECT_FLAG=" --project=${PROJECT}"
fi
err "log of worker 0 (each worker has its own):" \
  "gcloud compute tpus tpu-vm ssh ${TPU_NAME} --zone=${ZONE}${PROJECT_FLAG} --worker=0 --command='tail -n 100 -f ${LOG}'"
