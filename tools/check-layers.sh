#!/usr/bin/env bash
# Fails when a layer includes a header of a layer above it (the order is in
# src/CMakeLists.txt). The static libraries catch most of it at link time;
# this catches a header-only use and says which line.
#   tools/check-layers.sh [SOURCE_DIR]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}

# Each layer and the layers it may include, itself included.
declare -A allowed=(
  [util]="util"
  [config]="util config"
  [storage]="util storage"
  [cache]="util config storage cache"
  [bundle]="util config storage cache bundle"
  [compile]="util config storage cache compile"
  [cluster]="util config storage cache cluster"
  [launcher]="util config storage cache compile cluster launcher"
  [cli]="util config storage cache compile launcher bundle cli"
)

bad=0
for layer in "${!allowed[@]}"; do
  for file in "$root"/src/"$layer"/*.cpp "$root"/include/npc/"$layer"/*.hpp; do
    [ -e "$file" ] || continue
    while IFS=: read -r line used; do
      if [[ " ${allowed[$layer]} " != *" $used "* ]]; then
        echo "${file#"$root"/}:$line: the $layer layer includes npc/$used/ (a layer above it)"
        bad=1
      fi
    done < <(grep -no '#include <npc/[a-z_]*/' "$file" | sed 's|:#include <npc/|:|; s|/$||')
  done
done
[ "$bad" = 0 ] || { echo "check-layers: see the layer order in src/CMakeLists.txt" >&2; exit 1; }
echo "check-layers: every include goes down the layers"
