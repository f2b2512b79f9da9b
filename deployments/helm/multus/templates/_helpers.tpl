{{/* Multus' labels: app, name, tier */}}
{{- define "multus.labels" -}}
app: multus
name: multus
tier: node
{{- end }}

{{/* The one image, with rke2-multus' global.systemDefaultRegistry prefix */}}
{{- define "multus.image" -}}
{{- if .Values.global.systemDefaultRegistry -}}{{ .Values.global.systemDefaultRegistry }}/{{- end -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The resident mode's image and pull policy: rke2-multus' thickPlugin.image when it names a repository (the tag and
pull policy default to image's), else the one image. It must be a multus-ts image: the containers run its paths.
*/}}
{{- define "multus.thickImage" -}}
{{- $t := (.Values.thickPlugin.image | default dict) -}}
{{- if $t.repository -}}
{{- if .Values.global.systemDefaultRegistry -}}{{ .Values.global.systemDefaultRegistry }}/{{- end -}}
{{ $t.repository }}:{{ $t.tag | default .Values.image.tag }}
{{- else -}}
{{ include "multus.image" . }}
{{- end -}}
{{- end }}

{{- define "multus.thickPullPolicy" -}}
{{- (.Values.thickPlugin.image | default dict).pullPolicy | default .Values.image.pullPolicy -}}
{{- end }}

{{/* The executable in the image */}}
{{- define "multus.bin" -}}/usr/src/multus-cni/bin/multus{{- end }}

{{/* The resident mode's static shim in the image, beside it */}}
{{- define "multus.shim" -}}/usr/src/multus-cni/bin/multus-shim{{- end }}

{{/* The environment of every multus container: the node's name, then extraEnv */}}
{{- define "multus.env" -}}
- name: MULTUS_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pod spec fields both DaemonSets share */}}
{{- define "multus.podCommon" -}}
hostNetwork: true
priorityClassName: system-node-critical
serviceAccountName: {{ .Values.serviceAccount.name }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
nodeSelector:
  {{- toYaml .Values.labels.nodeSelector | nindent 2 }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The kubeconfig token's binding of both modes' `multus install`: node (default) or pod */}}
{{- define "multus.tokenBinding" -}}
{{- $b := .Values.config.cni_conf.tokenBinding | default "pod" -}}
{{- if not (has $b (list "node" "pod")) -}}
{{- fail (printf "config.cni_conf.tokenBinding: %q is neither node nor pod" $b) -}}
{{- end -}}
{{- $b -}}
{{- end }}

{{/*
The resident mode's init container and kubeconfig sidecar: uid 0, so that what they write in the node's bin and
conf dirs (executables and the kubeconfig that root runs and reads) belongs to root and to no other user, and no
capability: as the owner of those root-owned directories uid 0 needs none to write in them (docs/reliability.md,
"Second probe").
*/}}
{{- define "multus.installerSecurity" -}}
runAsUser: 0
runAsNonRoot: false
# said, not left out: a helm upgrade --take-ownership over Multus' privileged containers merges into them
privileged: false
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
{{- end }}

{{/*
The resident daemon's daemon-config.json (JSON): config.daemon_conf, where rke2-multus' (Multus' container) paths
/host/<node path> become <node path> when the daemon's container mounts that node path at the same path, and
fail the render naming the key otherwise; then the keys the chart's switches set (dynamic networks, claim network
data, the metrics scrape).
*/}}
{{- define "multus.daemonConf" -}}
{{- $mounted := list "/etc/cni/net.d" "/opt/cni/bin" "/run/multus" "/var/lib/cni/multus" "/var/lib/kubelet" "/run/k8s.cni.cncf.io" "/run/netns" "/etc/cni/multus/net.d" -}}
{{- $conf := dict -}}
{{- range $key, $value := .Values.config.daemon_conf -}}
{{- if and (kindIs "string" $value) (hasPrefix "/host/" $value) -}}
{{- $path := trimPrefix "/host" $value -}}
{{- $ok := false -}}
{{- range $mounted -}}
{{- if or (eq (trimSuffix "/" $path) .) (hasPrefix (printf "%s/" .) $path) -}}{{- $ok = true -}}{{- end -}}
{{- end -}}
{{- if not $ok -}}
{{- fail (printf "config.daemon_conf.%s: %q is a path inside Multus' container (rke2-multus' /host/... layout); this chart mounts the node's paths at the same paths in the daemon's container, only %s: write the node's path, under one of them" $key $value (join ", " $mounted)) -}}
{{- end -}}
{{- $_ := set $conf $key $path -}}
{{- else -}}
{{- $_ := set $conf $key $value -}}
{{- end -}}
{{- end -}}
{{- if .Values.dynamicNetworksController.enabled -}}
{{- $_ := set $conf "dynamicNetworks" true -}}
{{- end -}}
{{- if .Values.claimNetworkData.enabled -}}
{{- $_ := set $conf "publishClaimNetworkData" true -}}
{{- end -}}
{{- if .Values.draNetworks.enabled -}}
{{- $_ := set $conf "draNetworks" true -}}
{{- $_ := set $conf "draDriverName" .Values.draNetworks.driverName -}}
{{- $_ := set $conf "draInlineConfigFromClaims" .Values.draNetworks.inlineConfigFromClaims -}}
{{- end -}}
{{- if .Values.metrics.enabled -}}
{{- $_ := set $conf "metricsPort" (int .Values.metrics.port) -}}
{{- $_ := set $conf "metricsBindAddress" .Values.metrics.bindAddress -}}
{{- end -}}
{{- toJson $conf -}}
{{- end }}

{{/* config.daemon_conf's keys given as rke2-multus' /host/... paths (NOTES.txt names them) */}}
{{- define "multus.translatedKeys" -}}
{{- $keys := list -}}
{{- range $key, $value := .Values.config.daemon_conf -}}
{{- if and (kindIs "string" $value) (hasPrefix "/host/" $value) -}}{{- $keys = append $keys $key -}}{{- end -}}
{{- end -}}
{{- join ", " $keys -}}
{{- end }}

{{/* rke2-multus' value keys this chart has no use for, and why (NOTES.txt names them; set ones get a line) */}}
{{- define "multus.ignoredKeys" -}}
cniplugins.image: no CNI plugins init container, the node's CNI plugins are the node's
cniplugins.skipcnis: no CNI plugins init container
dhcpDaemonSet.image: no CNI dhcp daemon in this chart
manifests.dhcpDaemonSet: no CNI dhcp daemon in this chart
manifests.customResourceDefinition: the NetworkAttachmentDefinition CRD is in crds/, installed when missing
rke2-whereabouts.enabled: whereabouts is not bundled, install its own chart
dynamicNetworksController.image: the resident daemon follows the networks annotation itself
dynamicNetworksController.sockets: the resident daemon follows the networks annotation itself
pod.resources.dynamicNetworksController: no controller container
nameOverride: Multus' object names are kept
fullnameOverride: Multus' object names are kept
serviceAccount.create: manifests.serviceAccount renders it
serviceAccount.annotations: not rendered
podSecurityContext: the containers' security contexts are the chart's
securityContext: the containers' security contexts are the chart's
affinity: not rendered, use labels.nodeSelector and tolerations
{{- end }}
