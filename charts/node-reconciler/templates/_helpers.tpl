{{/* Common labels, names and checks of the node-reconciler chart. */}}

{{- define "node-reconciler.labels" -}}
app.kubernetes.io/name: node-reconciler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "node-reconciler.selector" -}}
app.kubernetes.io/name: node-reconciler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "node-reconciler.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default "node-reconciler" -}}
{{- end -}}

{{/* The image reference: repository@digest when a digest is given, else repository:tag (default appVersion). */}}
{{- define "node-reconciler.image" -}}
{{- include "node-reconciler.imageRef" (merge (dict "tag" (.Values.image.tag | default .Chart.AppVersion)) (omit .Values.image "tag")) -}}
{{- end -}}

{{/* An image reference from {repository, tag, digest}: repository@digest when a digest is given. */}}
{{- define "node-reconciler.imageRef" -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}

{{/* "true" when /metrics listens on the loopback address only (controller.metrics.bindAddress). */}}
{{- define "node-reconciler.metricsLocal" -}}
{{- has .Values.controller.metrics.bindAddress (list "127.0.0.1" "localhost") -}}
{{- end -}}

{{/* "true" when something serves /metrics beyond the pod: the kube-rbac-proxy sidecar, or the
     controller itself on a non-loopback address. */}}
{{- define "node-reconciler.metricsServed" -}}
{{- or .Values.controller.metrics.rbacProxy.enabled (ne (include "node-reconciler.metricsLocal" .) "true") -}}
{{- end -}}

{{/* Checks across values that values.schema.json cannot express (the schema checks each value). */}}
{{- define "node-reconciler.check" -}}
{{- $t := .Values.recipeSource.type -}}
{{- if and (eq $t "git") (not .Values.recipeSource.git.url) -}}
{{- fail "recipeSource.type=git needs recipeSource.git.url" -}}
{{- end -}}
{{- if and (ne .Values.pipeline.mode "none") (eq $t "crd") -}}
{{- fail "the pipeline Job/CronJob runs `reconciler apply` on files: set recipeSource.type to git or directory" -}}
{{- end -}}
{{- $m := .Values.controller.metrics -}}
{{- if and $m.serviceMonitor.enabled (not (and .Values.controller.enabled $m.service.enabled (include "node-reconciler.metricsServed" . | eq "true"))) -}}
{{- fail "controller.metrics.serviceMonitor needs the metrics Service: set controller.metrics.rbacProxy.enabled=true (authenticated HTTPS), with controller.enabled and controller.metrics.service.enabled" -}}
{{- end -}}
{{- range $key, $url := dict "recipeSource.git.url" .Values.recipeSource.git.url "statusRepo.url" .Values.statusRepo.url -}}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*:[^/@]*@" ($url | toString) -}}
{{- fail (printf "%s carries a password or token in the URL: it would be in the pod spec and its logs; put the token in a Secret (key token) and name it in secretName" $key) -}}
{{- end -}}
{{- if regexMatch "^https?://[^/@]+@" ($url | toString) -}}
{{- fail (printf "%s carries credentials in the URL: it would be in the pod spec and its logs; put the token in a Secret (key token) and name it in secretName" $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Pod-level settings shared by the controller and the pipeline pods. */}}
{{- define "node-reconciler.podCommon" -}}
serviceAccountName: {{ include "node-reconciler.serviceAccountName" . }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.affinity }}
affinity:
  {{- toYaml .Values.affinity | nindent 2 }}
{{- else if and .Values.placement.avoidManagedNodes .Values.placement.managedNodes }}
{{- /* not on a managed node: no expression of placement.managedNodes may match (each negated, ANDed) */}}
{{- $not := dict "In" "NotIn" "NotIn" "In" "Exists" "DoesNotExist" "DoesNotExist" "Exists" }}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            {{- range .Values.placement.managedNodes }}
            - key: {{ .key | quote }}
              operator: {{ get $not .operator }}
              {{- with .values }}
              values: {{ toJson . }}
              {{- end }}
            {{- end }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* Volumes of the recipe source (directory: the given volume sources; git: a work dir). */}}
{{- define "node-reconciler.sourceVolumes" -}}
- name: tmp
  emptyDir: {}
{{- if eq .Values.recipeSource.type "directory" }}
- name: recipes
  {{- toYaml .Values.recipeSource.directory.volume | nindent 2 }}
{{- with .Values.recipeSource.directory.policyVolume }}
- name: policies
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- else if eq .Values.recipeSource.type "git" }}
- name: source
  emptyDir: {}
{{- else if and (eq .Values.recipeSource.type "crd") .Values.recipeSource.crd.policyVolume }}
- name: policies
  {{- toYaml .Values.recipeSource.crd.policyVolume | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "node-reconciler.sourceMounts" -}}
- {name: tmp, mountPath: /tmp}
{{- if eq .Values.recipeSource.type "directory" }}
- {name: recipes, mountPath: /inputs/recipes, readOnly: true}
{{- if .Values.recipeSource.directory.policyVolume }}
- {name: policies, mountPath: /inputs/policies, readOnly: true}
{{- end }}
{{- else if eq .Values.recipeSource.type "git" }}
- {name: source, mountPath: /source}
{{- else if and (eq .Values.recipeSource.type "crd") .Values.recipeSource.crd.policyVolume }}
- {name: policies, mountPath: /inputs/policies, readOnly: true}
{{- end }}
{{- end -}}

{{/* RECONCILER_GIT_TOKEN from recipeSource.git.secretName (key token), when given. */}}
{{- define "node-reconciler.gitTokenEnv" -}}
{{- if and (eq .Values.recipeSource.type "git") .Values.recipeSource.git.secretName }}
- name: RECONCILER_GIT_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ .Values.recipeSource.git.secretName | quote }}, key: token}
{{- end }}
{{- end -}}

{{/* RECONCILER_STATUS_TOKEN from statusRepo.secretName (key token): only in the container that
pushes status commits (not in the clone init container). */}}
{{- define "node-reconciler.statusTokenEnv" -}}
{{- if and .Values.statusRepo.url .Values.statusRepo.secretName }}
- name: RECONCILER_STATUS_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ .Values.statusRepo.secretName | quote }}, key: token}
{{- end }}
{{- end -}}

{{/* --status-repo/--status-branch (one argument each, "--flag=value") when statusRepo.url is set;
clusterName is required then (status files are per cluster). */}}
{{- define "node-reconciler.statusArgs" -}}
{{- with .Values.statusRepo.url }}
{{- if not $.Values.clusterName }}
{{- fail "statusRepo.url needs clusterName (status files are per cluster)" }}
{{- end }}
- {{ printf "--status-repo=%s" . | quote }}
- {{ printf "--status-branch=%s" $.Values.statusRepo.branch | quote }}
{{- end }}
{{- end -}}
