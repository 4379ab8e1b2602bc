#!/bin/sh
# Check counterpart of run_mode.sh: runs $SKYHOOK_DIR/configmaps/<mode>_check.sh when present.
set -eu
mode="${1:?usage: run_mode_check.sh MODE}"
script="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps/$(printf '%s' "$mode" | tr '-' '_')_check.sh"
if [ ! -f "$script" ]; then
    echo "sysctl-shell: no $script; check of $mode passes"
    exit 0
fi
echo "sysctl-shell: checking with $script"
exec /bin/sh "$script"
