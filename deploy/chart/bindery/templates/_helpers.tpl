{{/* Names, labels and the few decisions several templates share. */}}

{{- define "bindery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bindery.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "bindery.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "bindery.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
The pods' selector labels. app.kubernetes.io/name is bindery-server whatever
the release: `bindery bind --in-cluster` makes each consumer's Service select
bindery's pods in kube-bind by that label alone.
*/}}
{{- define "bindery.selectorLabels" -}}
app.kubernetes.io/name: bindery-server
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "bindery.labels" -}}
{{ include "bindery.selectorLabels" . }}
app.kubernetes.io/part-of: bindery
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "bindery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "bindery.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "bindery.pkiSecretName" -}}
{{- default (printf "%s-pki" (include "bindery.fullname" .)) .Values.pki.existingSecret }}
{{- end }}

{{/* "true" when bindery reaches its provider through a kubeconfig Secret. */}}
{{- define "bindery.remoteProvider" -}}
{{- if .Values.provider.kubeconfigSecret }}true{{ end }}
{{- end }}

{{/* "true" when the provider-side RBAC belongs in this release. */}}
{{- define "bindery.providerRBAC" -}}
{{- if and .Values.rbac.create (or .Values.rbac.providerOnly (not .Values.provider.kubeconfigSecret)) }}true{{ end }}
{{- end }}

{{/* The ClusterRole of Secrets and ConfigMaps bindery binds to itself in each
namespace it serves (its cluster and provider namespaces). */}}
{{- define "bindery.namespaceDataRole" -}}
{{- default (printf "%s:namespace-data" (include "bindery.fullname" .)) .Values.rbac.namespaceDataRole }}
{{- end }}
