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
