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
  description = "IAM members who run the pipeline CLI (e.g. [\"user:a@lab.org\", \"group:connectomics@lab.org\"]): granted Firestore, GKE developer, publish on `kick`, and pull on `alerts-operator`."
  type        = list(string)
  default     = []
}
