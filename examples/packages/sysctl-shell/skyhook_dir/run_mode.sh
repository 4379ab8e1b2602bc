#!/bin/sh
# Runs the script the recipe put in its configMap for this mode, if any:
#   $SKYHOOK_DIR/configmaps/<mode>.sh  (post-interrupt -> post_interrupt.sh)
# A mode without a script succeeds and says so, so a recipe only ships the modes it needs.
set -eu
mode="${1:?usage: run_mode.sh MODE}"
script="${SKYHOOK_DIR:?SKYHOOK_DIR is not set}/configmaps/$(printf '%s' "$mode" | tr '-' '_').sh"
if [ ! -f "$script" ]; then
    echo "sysctl-shell: no $script; nothing to do for $mode"
    exit 0
fi
echo "sysctl-shell: running $script"
exec /bin/sh "$script"
