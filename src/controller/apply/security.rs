//! ACL bindings and SCRAM credentials: CreateAcls, DeleteAcls and
//! AlterUserScramCredentials applied.

use super::*;

impl MetadataImage {
    /// Each user's credential changes, together or not at all, in the order
    /// the users first appear.
    pub(super) fn create_acls(&mut self, bindings: &[(uuid::Uuid, AclBinding)]) -> CommandOutcome {
        if bindings.len() > ACL_CHANGES_PER_REQUEST_MAX {
            return CommandOutcome::Rejected(MetadataError::InvalidRequest(format!(
                "a request may create at most {ACL_CHANGES_PER_REQUEST_MAX} ACLs"
            )));
        }
        let acls = Arc::make_mut(&mut self.acls);
        for (id, binding) in bindings {
            // An identical binding is kept once; a taken id (never drawn
            // twice in practice) leaves the binding out rather than replace
            // another.
            acls.insert(*id, binding.clone());
        }
        CommandOutcome::Done
    }

    pub(super) fn delete_acls(&mut self, filters: &[AclFilter]) -> CommandOutcome {
        let matched: Vec<Vec<(uuid::Uuid, AclBinding)>> = filters
            .iter()
            .map(|filter| {
                self.acls
                    .matching(filter)
                    .map(|(id, binding)| (*id, binding.clone()))
                    .collect()
            })
            .collect();
        let ids: BTreeSet<uuid::Uuid> = matched.iter().flatten().map(|(id, _)| *id).collect();
        if ids.len() > ACL_CHANGES_PER_REQUEST_MAX {
            return CommandOutcome::AclsDeleted(Err(format!(
                "the filters match {} ACLs; a request may delete at most {ACL_CHANGES_PER_REQUEST_MAX}",
                ids.len()
            )));
        }
        if !ids.is_empty() {
            let acls = Arc::make_mut(&mut self.acls);
            for id in &ids {
                acls.remove(id);
            }
        }
        CommandOutcome::AclsDeleted(Ok(matched
            .into_iter()
            .map(|bindings| bindings.into_iter().map(|(_, binding)| binding).collect())
            .collect()))
    }

    pub(super) fn alter_scram(
        &mut self,
        upsertions: &[ScramUpsertion],
        deletions: &[ScramDeletion],
        only_if_absent: bool,
    ) -> CommandOutcome {
        let mut users: Vec<&str> = Vec::new();
        for name in deletions
            .iter()
            .map(|d| d.name.as_str())
            .chain(upsertions.iter().map(|u| u.name.as_str()))
        {
            if !users.contains(&name) {
                users.push(name);
            }
        }
        let mut results = Vec::with_capacity(users.len());
        for user in users {
            let missing = deletions.iter().find(|d| {
                d.name == user
                    && !self
                        .scram_credentials
                        .get(user)
                        .is_some_and(|by_mechanism| by_mechanism.contains_key(&d.mechanism))
            });
            if missing.is_some() {
                results.push((
                    user.to_string(),
                    error_code::RESOURCE_NOT_FOUND,
                    Some("Attempt to delete a user credential that does not exist".to_string()),
                ));
                continue;
            }
            let credentials = self.scram_credentials.entry(user.to_string()).or_default();
            for deletion in deletions.iter().filter(|d| d.name == user) {
                credentials.remove(&deletion.mechanism);
            }
            for upsertion in upsertions.iter().filter(|u| u.name == user) {
                if only_if_absent && credentials.contains_key(&upsertion.mechanism) {
                    continue;
                }
                credentials.insert(upsertion.mechanism, upsertion.credential.clone());
            }
            if credentials.is_empty() {
                self.scram_credentials.remove(user);
            }
            results.push((user.to_string(), error_code::NONE, None));
        }
        CommandOutcome::UsersAltered(results)
    }
}
