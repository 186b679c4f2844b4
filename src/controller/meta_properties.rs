//! `meta.properties`: who this data dir belongs to, as Kafka keeps it in each log
//! dir. Written by a clustered node only (a single-node broker's data dir has
//! none, as before clusters existed): the node id, the controller voters it was
//! started with and, once known, the cluster id.
//!
//! Invariant: once written, the node id and the voters never change for the
//! data dir, and the cluster id only goes from absent to one value; every start
//! checks the command line against the file and refuses a mismatch with a
//! message saying what to fix. The file is replaced atomically and durably.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::config::{parse_voters, Voter};
use crate::log::write_atomically;

const FILE_NAME: &str = "meta.properties";
/// The format version of the file.
const VERSION: &str = "1";

/// What the file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub node_id: i32,
    pub voters: Vec<Voter>,
    pub cluster_id: Option<String>,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// The file in `dir`, if there is one. Blocking.
pub fn read(dir: &Path) -> io::Result<Option<MetaProperties>> {
    let text = match std::fs::read_to_string(path(dir)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let invalid = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path(dir).display()),
        )
    };
    let mut fields = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| invalid(format!("line {line:?} is not key=value")))?;
        fields.insert(key.trim(), value.trim());
    }
    if fields.get("version") != Some(&VERSION) {
        return Err(invalid(format!(
            "version {:?} is not {VERSION}",
            fields.get("version")
        )));
    }
    let node_id = fields
        .get("node.id")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| invalid("no valid node.id".to_string()))?;
    let voters = fields
        .get("controller.voters")
        .ok_or_else(|| invalid("no controller.voters".to_string()))
        .and_then(|voters| parse_voters(voters).map_err(invalid))?;
    let cluster_id = fields
        .get("cluster.id")
        .filter(|id| !id.is_empty())
        .map(|id| id.to_string());
    Ok(Some(MetaProperties {
        node_id,
        voters,
        cluster_id,
    }))
}

/// Replaces the file in `dir`, durably. Blocking.
pub fn write(dir: &Path, meta: &MetaProperties) -> io::Result<()> {
    let voters: Vec<String> = meta.voters.iter().map(Voter::to_string).collect();
    let mut text = format!(
        "# Who this data dir belongs to; checked at every start.\nversion={VERSION}\nnode.id={}\ncontroller.voters={}\n",
        meta.node_id,
        voters.join(",")
    );
    if let Some(cluster_id) = &meta.cluster_id {
        text.push_str(&format!("cluster.id={cluster_id}\n"));
    }
    std::fs::create_dir_all(dir)?;
    write_atomically(&path(dir), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_properties_round_trip_and_reject_damage() {
        let dir = tempfile::tempdir().expect("test value");
        assert_eq!(read(dir.path()).expect("test value"), None);
        let mut meta = MetaProperties {
            node_id: 2,
            voters: parse_voters("1@a:1,2@b:2,3@c:3").expect("test value"),
            cluster_id: None,
        };
        write(dir.path(), &meta).expect("test value");
        assert_eq!(read(dir.path()).expect("test value"), Some(meta.clone()));
        meta.cluster_id = Some("AAAAAAAAAAAAAAAAAAAAAA".to_string());
        write(dir.path(), &meta).expect("test value");
        assert_eq!(read(dir.path()).expect("test value"), Some(meta));
        std::fs::write(path(dir.path()), "version=1\nnode.id=x\n").expect("test value");
        assert!(read(dir.path()).is_err());
    }
}
