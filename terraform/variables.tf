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
  description = "Kubernetes namespace of the pipeline's Jobs (the controller's PIPELINE_NAMESPACE, the Workload Identity binding, the log-sink filter)."
  type        = string
  default     = "default"
}

variable "worker_ksa" {
  description = "Kubernetes service account of the worker pods (pipeline.yml workload_identity.ksa)."
  type        = string
  default     = "pipeline-worker"
}

variable "deletion_protection" {
  description = "Protect the GKE cluster from `terraform destroy`."
  type        = bool
  default     = false
}

variable "bigtable_instance" {
  description = "Bigtable instance the workers read and write (pipeline.yml's instance): the worker is granted bigtable.user on it, not on the project."
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

variable "tick_schedule" {
  description = "Cloud Scheduler cron for the heartbeat on `ticks` (the controller's tick period)."
  type        = string
  default     = "* * * * *"
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
  description = "IAM members who run the pipeline CLI (e.g. [\"user:a@lab.org\"]): granted Firestore, GKE cluster viewer, publish on `kick`, pull on `alerts-operator`, and (output pipeline_rbac_manifest) Jobs/pods/logs/events in the namespace. `group:` members need Google Groups for RBAC on the cluster."
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

variable "private_nodes" {
  description = "Nodes without external IP addresses (Google APIs through Private Google Access). Workloads that need the internet then need Cloud NAT, or set false."
  type        = bool
  default     = true
}

variable "control_plane_google_cidrs" {
  description = "Let Google Cloud's public IP ranges reach the control plane. The functions need it (they have no fixed egress address), and so does Cloud Shell."
  type        = bool
  default     = true
}

variable "authorized_networks" {
  description = "Further CIDRs allowed to reach the control plane (operators' networks running kubectl / the pipeline CLI), e.g. [{ cidr_block = \"203.0.113.0/24\", display_name = \"lab\" }]. Empty: only Google Cloud's ranges (control_plane_google_cidrs)."
  type = list(object({
    cidr_block   = string
    display_name = string
  }))
  default = []
}

variable "manage_binary_authorization_policy" {
  description = "Create the project's Binary Authorization policy in audit mode (cluster.tf). Set false if the project's policy is managed elsewhere (the cluster still evaluates it)."
  type        = bool
  default     = true
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
