variable "project_id" {
  description = "Google Cloud project for the cluster, topics, functions and Firestore."
  type        = string
}

variable "region" {
  description = "Region of the Autopilot cluster, functions, scheduler and images (us-central1/us-east1/us-west1 are the cheapest tier)."
  type        = string
  default     = "us-east1"
}

variable "common_name" {
  description = "Name of the cluster and prefix of the service accounts, repository, sink and scheduler job."
  type        = string
  default     = "cave-pipeline"

  validation {
    # The longest derived service-account id is "<common_name>-controller" (<= 30 chars).
    condition     = can(regex("^[a-z][a-z0-9-]{0,17}[a-z0-9]$", var.common_name))
    error_message = "common_name: 2-19 characters, lowercase letters, digits and '-', starting with a letter."
  }
}

variable "namespace" {
  description = "Kubernetes namespace of the pipeline's Jobs, its own (created by the pipeline_kubernetes_manifest output): the controller's PIPELINE_NAMESPACE, the Workload Identity bindings, the log-sink filter. pipeline.yml's `namespace` must name it too."
  type        = string
  default     = "cave-pipeline"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace)) && !contains(["default", "kube-system", "kube-public", "kube-node-lease"], var.namespace)
    error_message = "namespace: a DNS-1123 label of the pipeline's own (not default or a kube-* namespace)."
  }
}

variable "worker_ksa" {
  description = "Kubernetes service account of the worker pods (pipeline.yml workload_identity.ksa)."
  type        = string
  default     = "pipeline-worker"
}

variable "setup_ksa" {
  description = "Kubernetes service account of the setup pods, which create the graph's table (pipeline.yml workload_identity.setup_ksa)."
  type        = string
  default     = "pipeline-setup"
}

variable "deletion_protection" {
  description = "Protect the GKE cluster from `terraform destroy`."
  type        = bool
  default     = false
}

variable "bigtable_instance" {
  description = "Bigtable instance of the graphs (pipeline.yml's instance): the workers get bigtable.user on it, the setup pods (which create the graph's table) bigtable.admin; nothing on the project."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,31}[a-z0-9]$", var.bigtable_instance))
    error_message = "bigtable_instance: the instance id (6-33 characters: lowercase letters, digits, '-')."
  }
}

variable "bigtable_project" {
  description = "Project of the Bigtable instance the workers write to (default: project_id)."
  type        = string
  default     = ""
}

variable "functions_source_bucket" {
  description = "Existing bucket for the functions' source zip; empty creates <project_id>-<common_name>-fn-src."
  type        = string
  default     = ""
}

variable "tick_period_minutes" {
  description = "The heartbeat's period in whole minutes (Cloud Scheduler's granularity). It sets the scheduler's cron (every N minutes) and the functions' PIPELINE_TICK_PERIOD_S, which sizes the tail watch's budget and the age after which a tick is stale (docs/ticks-and-evictions.md)."
  type        = number
  default     = 1

  validation {
    condition     = var.tick_period_minutes >= 1 && var.tick_period_minutes <= 59 && floor(var.tick_period_minutes) == var.tick_period_minutes
    error_message = "tick_period_minutes must be a whole number of minutes from 1 to 59 (Cloud Scheduler fires at most once a minute)."
  }
}

variable "max_instances" {
  description = "max_instance_count of each function. 1 serializes reconciles (one request per instance); correctness does not depend on it (the store's preconditions do that)."
  type        = number
  default     = 1

  validation {
    condition     = var.max_instances >= 1
    error_message = "max_instances must be at least 1."
  }
}

variable "event_max_age_s" {
  description = "Job events older than this are dropped by on-job-event (PIPELINE_EVENT_MAX_AGE_S); the tick covers them."
  type        = number
  default     = 3600
}

variable "create_firestore_database" {
  description = "Create the (default) Firestore database. Set false when the project already has one (Native mode)."
  type        = bool
  default     = true
}

variable "firestore_location" {
  description = "Firestore location (a region such as us-east1, or a multi-region such as nam5). Empty: var.region. Cannot be changed later."
  type        = string
  default     = ""
}

variable "operator_members" {
  description = "IAM members who run the pipeline CLI (e.g. [\"user:a@lab.org\"]): granted Firestore, GKE cluster viewer (the DNS endpoint), publish on `kick`, pull on `alerts-operator`, and (output pipeline_kubernetes_manifest) the operators' Role: read Jobs/pods/logs/events and pod metrics, write the pods' Secret. `group:` members need Google Groups for RBAC on the cluster."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.operator_members : can(regex("^(user|group|serviceAccount):[^:@]+@[^:@]+$", m))])
    error_message = "operator_members: user:<email>, group:<email> or serviceAccount:<email> (they become Kubernetes RBAC subjects too)."
  }
}

variable "labels" {
  description = "Labels on the cluster and every labelled resource (provider default_labels)."
  type        = map(string)
  default     = { app = "cave-pipeline" }
}

variable "network" {
  description = "VPC network of the cluster (name or self link). Empty: a network <common_name> is created with one subnet (network.tf); no `default` network is assumed."
  type        = string
  default     = ""
}

variable "subnetwork" {
  description = "Subnetwork of the cluster in var.region (name or self link); set together with `network`. Empty with `network` empty: created."
  type        = string
  default     = ""
}

variable "subnetwork_cidr" {
  description = "Primary range of the created subnetwork (nodes); GKE adds the pod and service ranges. Only used when `network` is empty."
  type        = string
  default     = "10.20.0.0/20"
}

variable "private_nodes" {
  description = "Nodes without external IP addresses (Google APIs through Private Google Access). Their internet egress (Docker Hub images, CAVE endpoints) then goes through the Cloud NAT of network.tf."
  type        = bool
  default     = true
}

variable "cloud_nat" {
  description = "With private nodes, create a Cloud Router and Cloud NAT for the cluster's subnetwork (network.tf). Set false only when the subnetwork already has a NAT (e.g. a Shared VPC's, managed in its host project)."
  type        = bool
  default     = true
}

variable "control_plane_google_cidrs" {
  description = "Also let Google Cloud's public IP ranges reach the control plane's IP endpoint. Nothing of the pipeline needs it: the functions and operators use the DNS endpoint (IAM-gated)."
  type        = bool
  default     = false
}

variable "authorized_networks" {
  description = "CIDRs allowed to reach the control plane's IP endpoint (e.g. [{ cidr_block = \"203.0.113.0/24\", display_name = \"lab\" }]). Not needed for the DNS endpoint, which the functions and `gcloud container clusters get-credentials --dns-endpoint` use."
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
  default = []
}

variable "data_buckets" {
  description = "Buckets the pods read (segmentation, edges, components) or write (meshes), each granted to the worker and setup accounts: access \"read-only\" (storage.objectViewer) or \"read-write\" (storage.objectUser), e.g. [{ name = \"my-seg\", access = \"read-only\" }]."
  type = list(object({
    name   = string
    access = string
  }))
  default = []

  validation {
    condition     = alltrue([for b in var.data_buckets : contains(["read-only", "read-write"], b.access)])
    error_message = "data_buckets: access must be \"read-only\" or \"read-write\"."
  }

  validation {
    condition     = alltrue([for b in var.data_buckets : can(regex("^[a-z0-9][a-z0-9._-]{1,221}[a-z0-9]$", b.name))])
    error_message = "data_buckets: name is a bucket name (no gs:// prefix, no path)."
  }

  validation {
    condition     = length(distinct([for b in var.data_buckets : b.name])) == length(var.data_buckets)
    error_message = "data_buckets: each bucket once (read-write covers reading)."
  }
}

variable "manage_binary_authorization_policy" {
  description = "Replace the project's Binary Authorization policy (one per project) with an audit-only one (cluster.tf). Off by default: the cluster evaluates whatever policy the project has, and a lab's own (possibly enforcing) policy stays."
  type        = bool
  default     = false
}

variable "dead_letter_max_attempts" {
  description = "Deliveries of a trigger message (job-events, ticks, kick) before it goes to the dead-letters topic and raises a message_dead_lettered alert (5-100)."
  type        = number
  default     = 10

  validation {
    condition     = var.dead_letter_max_attempts >= 5 && var.dead_letter_max_attempts <= 100
    error_message = "dead_letter_max_attempts must be between 5 and 100 (Pub/Sub's limits)."
  }
}

# --- Alerts for people (alerts.tf, docs/alerts.md#notifications) -----------------------------

variable "alert_notification_channels" {
  description = "Existing Cloud Monitoring notification channels (ids, projects/P/notificationChannels/N: Slack, PagerDuty, SMS, webhooks, Pub/Sub, e-mail) by alert severity: page, notify, inform."
  type        = map(list(string))
  default     = {}

  validation {
    condition     = alltrue([for level in keys(var.alert_notification_channels) : contains(["page", "notify", "inform"], level)])
    error_message = "alert_notification_channels: keys are severities, page, notify or inform."
  }
}

variable "alert_emails" {
  description = "E-mail addresses by alert severity (page, notify, inform); an e-mail notification channel is created for each address."
  type        = map(list(string))
  default     = {}

  validation {
    condition     = alltrue([for level in keys(var.alert_emails) : contains(["page", "notify", "inform"], level)])
    error_message = "alert_emails: keys are severities, page, notify or inform."
  }
}

variable "alert_severity_overrides" {
  description = "A severity per alert kind that differs from the code's (docs/alerts.md#severities), e.g. { budget_reached = \"page\" }."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for level in values(var.alert_severity_overrides) : contains(["page", "notify", "inform"], level)])
    error_message = "alert_severity_overrides: values are severities, page, notify or inform."
  }
}

variable "controller_alert_severity" {
  description = "The severity of the controller's own failures: function errors, dead letters waiting, a silent tick."
  type        = string
  default     = "page"

  validation {
    condition     = contains(["page", "notify", "inform"], var.controller_alert_severity)
    error_message = "controller_alert_severity: page, notify or inform."
  }
}

variable "alert_rate_limit_minutes" {
  description = "At most one notification per alert policy per this many minutes (a burst of one kind is one notification)."
  type        = number
  default     = 30

  validation {
    condition     = var.alert_rate_limit_minutes >= 5
    error_message = "alert_rate_limit_minutes: at least 5 (Cloud Monitoring's minimum notification rate limit)."
  }
}

variable "tick_silence_minutes" {
  description = "Alert when the tick has logged no heartbeat for this many minutes."
  type        = number
  default     = 15

  validation {
    condition     = var.tick_silence_minutes >= 5
    error_message = "tick_silence_minutes: at least 5 (a few missed ticks are not yet an outage)."
  }
}

variable "dead_letter_backlog_threshold" {
  description = "Alert when a dead-letters subscription holds more than this many undelivered messages."
  type        = number
  default     = 0
}
