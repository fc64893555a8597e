{{/* The base of object names: "rouse" unless nameOverride. */}}
{{- define "rouse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object of component `.component` (controller or proxy). */}}
{{- define "rouse.labels" -}}
app.kubernetes.io/name: {{ include "rouse.name" .root }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: rouse
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ .root.Chart.Name }}-{{ .root.Chart.Version }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The selector labels of component `.component`. */}}
{{- define "rouse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rouse.name" .root }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* The ServiceAccount name of component `.component`. */}}
{{- define "rouse.serviceAccountName" -}}
{{- $sa := index .root.Values .component "serviceAccount" -}}
{{- default (printf "%s-%s" (include "rouse.name" .root) .component) $sa.name -}}
{{- end -}}

{{/* The image reference. */}}
{{- define "rouse.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The pod and container security context shared by both components: non-root, read-only root. */}}
{{- define "rouse.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "rouse.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
