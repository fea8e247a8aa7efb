# --- Firestore: run state ----------------------------------------------------------------------
#
# runs/{run}, runs/{run}/layers/..., .../pods/{uid}, and dedupe/{event_id} (see
# adapters/google/firestore_store.py). Each state transition is one atomic batched write whose
# run-document update carries a precondition (the update time of the version it was decided
# from), so of two concurrent reconciles of one run exactly one commits.
#
# A project has one (default) database; if it already exists, set create_firestore_database =
# false (it must be in Native mode), or import it into this resource.

locals {
  firestore_database = "(default)"
}

resource "google_firestore_database" "default" {
  count = var.create_firestore_database ? 1 : 0

  name        = local.firestore_database
  location_id = coalesce(var.firestore_location, var.region)
  type        = "FIRESTORE_NATIVE"

  # `terraform destroy` leaves the database (run history, cost records) in place.
  deletion_policy = "ABANDON"

  depends_on = [google_project_service.apis]
}

# Dedupe records of at-least-once deliveries expire by themselves: Firestore's TTL deletes a
# document some time (typically within a day) after its `expires_at`. A late deletion only
# makes a dedupe record last longer, which is harmless; the TTL keeps the collection small.
resource "google_firestore_field" "dedupe_ttl" {
  database   = local.firestore_database
  collection = "dedupe"
  field      = "expires_at"

  ttl_config {}

  depends_on = [google_firestore_database.default, google_project_service.apis]
}
