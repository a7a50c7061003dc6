#!/usr/bin/env bash
# Deletes a Cloud TPU VM or pod slice (billing stops; the workers' disks go with it, gs:// data stays).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: launch/delete_tpu.sh --name NAME --zone ZONE [--project PROJECT] [--yes] [--dry-run]

Deletes the TPU VM / pod slice NAME:
  gcloud compute tpus tpu-vm delete NAME --zone=ZONE [--project=PROJECT] [--quiet]

Required:
  --name NAME        TPU node name
  --zone ZONE        its zone

Options:
  --project PROJECT  Google Cloud project (default: gcloud's core/project)
  --yes              do not ask for confirmation (passes --quiet to gcloud)
  --dry-run          print the gcloud command instead of running it (also DRY_RUN=1)
  -h, --help         this help
Checkpoints and logs written to gs:// are kept; anything only on the workers' disks is lost.
EOF
}

# shellcheck source=launch/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

YES=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --yes | -y)
      YES=1
      shift
      ;;
    *)
      parse_common_opt_or_die "$@"
      shift "${COMMON_SHIFT}"
      ;;
  esac
done

check_common_opts

if [[ "${YES}" == 1 ]]; then
  tpu_cmd delete --quiet
else
  tpu_cmd delete
fi
