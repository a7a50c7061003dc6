#!/usr/bin/env bash
# Shared helpers of the launch/*.sh scripts; sourced, not run.
#
# Provides:
#   run CMD...                 execute CMD, or in dry-run mode (--dry-run or DRY_RUN=1) print it as
#                              "+ CMD" (shell-quoted with printf '%q', copy-pasteable) and execute nothing.
#   parse_common_opt "$@"      handles one shared option at $1 (--name, --zone, --project, --dry-run, --help)
#                              and sets COMMON_SHIFT to the number of words it used (0: not a shared option).
#   opt_value "$@"             value of the option at $1 ("--opt VALUE" or "--opt=VALUE"): OPTVAL, OPTSHIFT.
#   require_opt OPTION VALUE   exit 2 with "error: missing required option OPTION" if VALUE is empty.
#   die_usage MESSAGE          "error: MESSAGE" to stderr, exit 2.
#   sq WORD                    WORD quoted for a POSIX shell on the TPU workers (unquoted when safe).
#   remote_path PATH           like sq, but a leading ~/ stays "$HOME"/ (expanded on the worker).
#   tpu_cmd SUBCOMMAND...      run gcloud compute tpus tpu-vm SUBCOMMAND NAME --zone=ZONE [--project=P] ...
#
# The caller defines usage() (printed by --help) before calling parse_common_opt.
# shellcheck disable=SC2034  # variables set here (COMMON_SHIFT, DEFAULT_*) are read by the sourcing scripts.
# shellcheck disable=SC2088  # the ~/ paths are paths on the workers, expanded there (see remote_path).
set -euo pipefail

LAUNCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "${LAUNCH_DIR}/.." && pwd)
export LAUNCH_DIR REPO_ROOT

DRY_RUN=${DRY_RUN:-0}
TPU_NAME=""
ZONE=""
PROJECT=""

# Defaults shared by setup_workers.sh and run.sh (paths on the workers; ~/ is the worker's home).
DEFAULT_REMOTE_DIR="~/fewshot_nlu"
DEFAULT_DATA_DIR="~/data"
DEFAULT_JAX_CACHE="~/.cache/fewshot_nlu/jax"

err() {
  printf '%s\n' "$*" >&2
}

die_usage() {
  err "error: $*"
  err "(run $(basename "$0") --help for usage)"
  exit 2
}

require_opt() {
  if [[ -z "${2:-}" ]]; then
    die_usage "missing required option $1"
  fi
}

is_dry_run() {
  [[ "${DRY_RUN}" == 1 || "${DRY_RUN}" == true ]]
}

run() {
  if is_dry_run; then
    local line
    line=$(printf '%q ' "$@")
    printf '+ %s\n' "${line% }"
  else
    "$@"
  fi
}

opt_value() {
  # "--opt=VALUE" (one word) or "--opt VALUE" (two words).
  if [[ "$1" == *=* ]]; then
    OPTVAL=${1#*=}
    OPTSHIFT=1
  else
    if [[ $# -lt 2 ]]; then
      die_usage "option $1 needs a value"
    fi
    OPTVAL=$2
    OPTSHIFT=2
  fi
  if [[ -z "${OPTVAL}" ]]; then
    die_usage "option ${1%%=*} needs a non-empty value"
  fi
}

parse_common_opt() {
  COMMON_SHIFT=1
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    --name | --name=*)
      opt_value "$@"
      TPU_NAME=${OPTVAL}
      COMMON_SHIFT=${OPTSHIFT}
      ;;
    --zone | --zone=*)
      opt_value "$@"
      ZONE=${OPTVAL}
      COMMON_SHIFT=${OPTSHIFT}
      ;;
    --project | --project=*)
      opt_value "$@"
      PROJECT=${OPTVAL}
      COMMON_SHIFT=${OPTSHIFT}
      ;;
    *) COMMON_SHIFT=0 ;;
  esac
}

check_common_opts() {
  require_opt --name "${TPU_NAME}"
  require_opt --zone "${ZONE}"
  # Cloud TPU node IDs: lowercase letters, digits and hyphens, starting with a letter.
  if ! [[ "${TPU_NAME}" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then
    die_usage "--name '${TPU_NAME}': use lowercase letters, digits and hyphens, starting with a letter"
  fi
}

sq() {
  local s=$1 quoted
  if [[ -n "${s}" && "${s}" =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
    printf '%s' "${s}"
  else
    # ' -> '\'' with sed (the same in every bash; "${s//...}" quoting differs between bash 3.2 and 5).
    # The "." keeps trailing newlines through the command substitution.
    quoted=$(printf '%s.' "${s}" | sed "s/'/'\\\\''/g")
    printf "'%s'" "${quoted%.}"
  fi
}

remote_path() {
  # shellcheck disable=SC2016  # "$HOME" is expanded by the shell on the worker, not here.
  case "$1" in
    "~") printf '"$HOME"' ;;
    "~/"*) printf '"$HOME"/%s' "$(sq "${1#\~/}")" ;;
    *) sq "$1" ;;
  esac
}

tpu_cmd() {
  # tpu_cmd SUBCOMMAND [ARGS...]: gcloud compute tpus tpu-vm SUBCOMMAND NAME --zone=ZONE [--project=P] ARGS...
  local sub=$1
  shift
  local cmd=(gcloud compute tpus tpu-vm "${sub}" "${TPU_NAME}" "--zone=${ZONE}")
  if [[ -n "${PROJECT}" ]]; then
    cmd+=("--project=${PROJECT}")
  fi
  run "${cmd[@]}" "$@"
}

tpu_ssh_all() {
  # Runs a command line on every worker of the TPU at once (it is parsed by the worker's login shell).
  tpu_cmd ssh --worker=all "--command=$1"
}

# parse_common_opt, and a usage error for an option that is neither the script's own nor a common one.
parse_common_opt_or_die() {
  parse_common_opt "$@"
  if [[ "${COMMON_SHIFT}" -eq 0 ]]; then
    die_usage "unknown option: $1"
  fi
}
