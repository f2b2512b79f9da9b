#!/usr/bin/env bash
# scripts/image.sh's manifests: our manifests and Helm chart naming the image just built (docs/install.md, "Image"):
#
#   bash scripts/image-manifests.sh OUT NAME TAG
#
# OUT/deployments/*.yml: deployments/*.yml with every `image: ghcr.io/multus-ts/multus-ts:<default>` naming NAME:TAG;
# OUT/multus-<chart version>.tgz: `helm package --app-version TAG` of deployments/helm/multus with image.repository
# NAME (the chart's image tag defaults to its appVersion). helm is the one the tests build (<cache>/helm/helm, or
# helm in PATH); without it the chart is not packaged and a line says so. The committed files name the default tag.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$1" name="$2" tag="$3"
default_image='ghcr.io/multus-ts/multus-ts:[0-9][0-9A-Za-z_.-]*'

mkdir -p "$out/deployments"
for f in "$root"/deployments/*.yml; do
  sed "s#image: $default_image\$#image: $name:$tag#" "$f" >"$out/deployments/$(basename "$f")"
done

helm="${MULTUS_TS_CACHE_DIR:-$root/.cache}/helm/helm"
[[ -x "$helm" ]] || helm="$(command -v helm || true)"
if [[ -z "$helm" ]]; then
  echo "image: no helm (bash test/peers/build-go-tool.sh helm): the chart is not packaged" >&2
  exit 0
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/multus-chart.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -r "$root/deployments/helm/multus" "$work/multus"
sed -i "s#^  repository: .*#  repository: $name#" "$work/multus/values.yaml"
HOME="$work" "$helm" package "$work/multus" --app-version "$tag" --destination "$out" >/dev/null
