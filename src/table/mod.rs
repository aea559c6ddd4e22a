//! Tables of custom resources, as kube-apiserver's table convertor makes
//! them for a CRD: a `Name` column and the version's printer columns (or
//! `Age` when it has none), one row per object with its cells and, as
//! `includeObject` asks, its metadata, the whole object, or nothing. bindery
//! renders the Tables of lists the watch cache answers from the consumer's
//! own objects and the consumer's schema; a column it cannot evaluate
//! exactly as Go does ([`jsonpath::Unsupported`]) sends the request to the
//! provider instead. Pure.

pub mod cells;
pub mod jsonpath;
pub mod pruned;
pub mod row;

use crate::wire::object_meta;
use crate::wire::query::IncludeObject;
use cells::CellType;
use jsonpath::{Path, Unsupported};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use pruned::Keep;
use row::MetadataRows;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::time::SystemTime;

/// `ObjectMeta.name`'s documentation: the `Name` column's description.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
/// `ObjectMeta.creationTimestamp`'s documentation: the default `Age`
/// column's description.
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The columns of one version of a resource.
#[derive(Clone, Debug)]
pub struct Columns {
    /// `columnDefinitions`, as kube-apiserver writes them.
    definitions: Value,
    /// Each printer column's path and type (after `Name`).
    paths: Vec<(Path, CellType)>,
    /// What of an object the cells read.
    keep: Keep,
    /// Rows with metadata in one pass, where the cells allow it.
    metadata_rows: Option<MetadataRows>,
    /// Names these columns among others: a hash of the version's printer
    /// columns as the CRD spells them.
    key: u64,
}

impl Columns {
    /// The columns of `version` of `spec`; [`Unsupported`] when a column's
    /// path is not one this renders exactly, or the version is not there.
    pub fn of(spec: &CustomResourceDefinitionSpec, version: &str) -> Result<Columns, Unsupported> {
        let served = spec
            .versions
            .iter()
            .find(|v| v.name == version)
            .ok_or(Unsupported)?;
        let mut definitions = vec![json!({
            "name": "Name", "type": "string", "format": "name",
            "description": NAME_DESCRIPTION, "priority": 0,
        })];
        let mut paths = Vec::new();
        let columns = served
            .additional_printer_columns
            .clone()
            .unwrap_or_default();
        let defaulted = columns.is_empty();
        for column in &columns {
            paths.push((Path::parse(&column.json_path)?, CellType::of(&column.type_)));
            let description = column
                .description
                .clone()
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| {
                    format!(
                        "Custom resource definition column (in JSONPath format): {}",
                        column.json_path
                    )
                });
            definitions.push(json!({
                "name": column.name, "type": column.type_,
                "format": column.format.clone().unwrap_or_default(),
                "description": description, "priority": column.priority.unwrap_or(0),
            }));
        }
        if defaulted {
            paths.push((Path::parse(".metadata.creationTimestamp")?, CellType::Date));
            definitions.push(json!({
                "name": "Age", "type": "date", "format": "",
                "description": CREATION_TIMESTAMP_DESCRIPTION, "priority": 0,
            }));
        }
        let mut keep = Keep::nothing();
        keep.add(&["metadata".into(), "name".into()]);
        for (path, _) in &paths {
            keep.add(&path.leading_fields());
        }
        let key = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(&columns)
                .map_err(|_| Unsupported)?
                .hash(&mut hasher);
            hasher.finish()
        };
        Ok(Columns {
            definitions: Value::Array(definitions),
            paths,
            metadata_rows: MetadataRows::of(&keep),
            keep,
            key,
        })
    }

    /// `columnDefinitions`, `Name` first.
    pub fn definitions(&self) -> &Value {
        &self.definitions
    }

    /// The cells of an object given as its JSON, at `now`: only what the
    /// columns read of it is decoded.
    pub fn cells_of(&self, object: &str, now: SystemTime) -> Result<Vec<Value>, Unsupported> {
        let object = self.keep.decode(object).map_err(|_| Unsupported)?;
        self.cells(&object, now)
    }

    /// What names the rows these columns make with `include`: rows made
    /// under the same key are the same for the same object.
    pub fn row_key(&self, include: IncludeObject) -> u64 {
        let include = match include {
            IncludeObject::None => 1,
            IncludeObject::Metadata => 2,
            IncludeObject::Object => 3,
        };
        self.key.rotate_left(2) ^ include
    }

    /// The row of an object given as its JSON, rendered but for its dates
    /// (kept to be written at the request's time): what a Table of it
    /// writes, and what the cache keeps per object per change.
    pub fn row_of(&self, item: &str, include: IncludeObject) -> Result<RowParts, Unsupported> {
        let (kept, metadata) = match (include, &self.metadata_rows) {
            (IncludeObject::Metadata, Some(rows)) => {
                let read = rows.read(item)?;
                (read.kept, Some(read.metadata))
            }
            (IncludeObject::Metadata, None) => {
                let meta: Option<&RawValue> = crate::deep::from_str::<ItemMeta>(item)
                    .map_err(|_| Unsupported)?
                    .metadata;
                let ordered = match meta {
                    Some(meta) => object_meta::in_struct_order(meta.get()).ok_or(Unsupported)?,
                    None => "{}".into(),
                };
                let kept = self.keep.decode(item).map_err(|_| Unsupported)?;
                (kept, Some(ordered))
            }
            _ => (self.keep.decode(item).map_err(|_| Unsupported)?, None),
        };
        let mut text = Vec::with_capacity(64 + metadata.as_ref().map_or(0, String::len));
        let mut dates = Vec::new();
        text.extend_from_slice(br#"{"cells":["#);
        for (i, cell) in self.found_cells(&kept)?.into_iter().enumerate() {
            if i > 0 {
                text.push(b',');
            }
            match cell {
                Found::Cell(value) => write_json(&mut text, &value)?,
                Found::Date(date) => dates.push((text.len(), date)),
            }
        }
        text.extend_from_slice(br#"],"object":"#);
        match (include, metadata) {
            (IncludeObject::None, _) => text.extend_from_slice(b"null"),
            (IncludeObject::Object, _) => text.extend_from_slice(item.as_bytes()),
            (IncludeObject::Metadata, metadata) => {
                text.extend_from_slice(
                    br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
                );
                text.extend_from_slice(metadata.as_deref().unwrap_or("{}").as_bytes());
                text.push(b'}');
            }
        }
        text.push(b'}');
        Ok(RowParts {
            text: text.into_boxed_slice(),
            dates: dates.into_boxed_slice(),
        })
    }

    /// One object's cells, at `now`.
    fn cells(&self, object: &Value, now: SystemTime) -> Result<Vec<Value>, Unsupported> {
        Ok(self
            .found_cells(object)?
            .into_iter()
            .map(|cell| match cell {
                Found::Cell(value) => value,
                Found::Date(date) => date_cell(date.as_deref(), now),
            })
            .collect())
    }

    /// One object's cells as found in it, `Name` first: what every cell
    /// but a date shows, whatever the time.
    fn found_cells(&self, object: &Value) -> Result<Vec<Found>, Unsupported> {
        let mut cells = Vec::with_capacity(1 + self.paths.len());
        cells.push(Found::Cell(object["metadata"]["name"].clone()));
        for (path, kind) in &self.paths {
            let found = path.first(object)?;
            if found.is_some_and(cells::has_negative_zero) {
                return Err(Unsupported);
            }
            cells.push(match kind {
                CellType::Date => Found::Date(found.and_then(Value::as_str).map(Box::from)),
                kind => Found::Cell(cells::cell(*kind, found, SystemTime::UNIX_EPOCH)),
            });
        }
        Ok(cells)
    }
}

/// A cell as found in an object: its value, or for a date column the
/// timestamp it shows as an age at the time of the request.
enum Found {
    Cell(Value),
    Date(Option<Box<str>>),
}

/// A date column's cell at `now`: the age of its timestamp (`null` when the
/// column found no string).
fn date_cell(date: Option<&str>, now: SystemTime) -> Value {
    date.map_or(Value::Null, |text| Value::String(cells::age(text, now)))
}

/// A list as the cache gives it: its metadata, and each item's JSON.
#[derive(serde::Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: Map<String, Value>,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

/// A Table row rendered but for its dates: the row's JSON with each date
/// cell left out, and where each goes with the timestamp it shows as an
/// age (`None`: the cell is `null`).
#[derive(Debug, PartialEq)]
pub struct RowParts {
    text: Box<[u8]>,
    dates: Box<[(usize, Option<Box<str>>)]>,
}

impl RowParts {
    /// The row as written at `now`.
    fn write(&self, out: &mut Vec<u8>, now: SystemTime) -> Result<(), Unsupported> {
        let mut at = 0;
        for (offset, date) in &self.dates {
            out.extend_from_slice(&self.text[at..*offset]);
            write_json(out, &date_cell(date.as_deref(), now))?;
            at = *offset;
        }
        out.extend_from_slice(&self.text[at..]);
        Ok(())
    }

    /// About how many bytes it writes, for sizing a Table.
    fn written_size(&self) -> usize {
        self.text.len() + 8 * self.dates.len()
    }
}

/// The Table (`meta.k8s.io/v1`) of `list` (a list of the resource, as JSON,
/// in the caller's terms), with `columns`, its rows carrying what `include`
/// asks; as compact JSON. The row objects are written from the items' own
/// bytes, and a row's cells decode only what the columns read of its item,
/// so a row costs about a pass over its item.
pub fn table(
    columns: &Columns,
    list: &[u8],
    include: IncludeObject,
    now: SystemTime,
) -> Result<Vec<u8>, Unsupported> {
    let list: RawList = crate::deep::from_slice(list).map_err(|_| Unsupported)?;
    let rows = list
        .items
        .unwrap_or_default()
        .iter()
        .map(|item| columns.row_of(item.get(), include))
        .collect::<Result<Vec<_>, _>>()?;
    table_of_rows(columns, &list.metadata, &rows, now)
}

/// The Table of rows made by [`Columns::row_of`] (kept by the cache per
/// object), under a list's `metadata`, at `now`.
pub fn table_of_rows<R: std::borrow::Borrow<RowParts>>(
    columns: &Columns,
    list_metadata: &Map<String, Value>,
    rows: &[R],
    now: SystemTime,
) -> Result<Vec<u8>, Unsupported> {
    let mut metadata = Map::new();
    for key in ["resourceVersion", "continue", "remainingItemCount"] {
        if let Some(value) = list_metadata.get(key).filter(|v| !is_empty(v)) {
            metadata.insert(key.into(), value.clone());
        }
    }
    let mut out = Vec::with_capacity(
        256 + rows
            .iter()
            .map(|r| r.borrow().written_size() + 16)
            .sum::<usize>(),
    );
    out.extend_from_slice(br#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":"#);
    write_json(&mut out, &Value::Object(metadata))?;
    out.extend_from_slice(br#","columnDefinitions":"#);
    write_json(&mut out, &columns.definitions)?;
    out.extend_from_slice(br#","rows":["#);
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        row.borrow().write(&mut out, now)?;
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

/// An item's metadata, as its JSON.
#[derive(serde::Deserialize)]
struct ItemMeta<'a> {
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
}

fn write_json(out: &mut Vec<u8>, value: &Value) -> Result<(), Unsupported> {
    serde_json::to_writer(out, value).map_err(|_| Unsupported)
}

/// What Go leaves out of a list's metadata (`omitempty`).
fn is_empty(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceColumnDefinition, CustomResourceDefinitionVersion,
    };

    fn spec(columns: Vec<CustomResourceColumnDefinition>) -> CustomResourceDefinitionSpec {
        CustomResourceDefinitionSpec {
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1".into(),
                served: true,
                storage: true,
                additional_printer_columns: Some(columns),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn column(name: &str, type_: &str, path: &str) -> CustomResourceColumnDefinition {
        CustomResourceColumnDefinition {
            name: name.into(),
            type_: type_.into(),
            json_path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_list_becomes_the_table_kube_apiserver_would_give() {
        let mut phase = column("Phase", "string", ".status.phase");
        phase.priority = Some(1);
        phase.description = Some("The phase.".into());
        let columns = Columns::of(
            &spec(vec![
                column("Size", "string", ".spec.size"),
                column("Replicas", "integer", ".spec.replicas"),
                phase,
            ]),
            "v1",
        )
        .unwrap();
        let list = json!({
            "apiVersion": "example.com/v1", "kind": "WidgetList",
            "metadata": {"resourceVersion": "42", "continue": "abc", "remainingItemCount": 3},
            "items": [
                {"apiVersion": "example.com/v1", "kind": "Widget",
                 "metadata": {"name": "a", "namespace": "team", "uid": "u1"},
                 "spec": {"size": "small", "replicas": 2}},
                {"apiVersion": "example.com/v1", "kind": "Widget",
                 "metadata": {"name": "b", "namespace": "team"},
                 "spec": {}, "status": {"phase": "Ready"}},
            ],
        });
        let now = SystemTime::now();
        let render = |list: &Value, include| -> Value {
            let bytes =
                super::table(&columns, &serde_json::to_vec(list).unwrap(), include, now).unwrap();
            serde_json::from_slice(&bytes).unwrap()
        };
        let text = String::from_utf8(
            super::table(
                &columns,
                &serde_json::to_vec(&list).unwrap(),
                IncludeObject::Metadata,
                now,
            )
            .unwrap(),
        )
        .unwrap();
        let table: Value = serde_json::from_str(&text).unwrap();
        assert!(
            text.starts_with(r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"42","continue":"abc","remainingItemCount":3},"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"Name must be unique"#),
            "{text}"
        );
        assert_eq!(
            table["columnDefinitions"][1],
            json!({"name": "Size", "type": "string", "format": "",
                "description": "Custom resource definition column (in JSONPath format): .spec.size",
                "priority": 0})
        );
        assert_eq!(table["columnDefinitions"][3]["priority"], 1);
        assert_eq!(table["columnDefinitions"][3]["description"], "The phase.");
        assert_eq!(table["rows"][0]["cells"], json!(["a", "small", 2, null]));
        assert_eq!(table["rows"][1]["cells"], json!(["b", null, null, "Ready"]));
        assert_eq!(
            table["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "namespace": "team", "uid": "u1"}})
        );
        let none = render(&list, IncludeObject::None);
        assert_eq!(none["rows"][1]["object"], Value::Null);
        let whole = render(&list, IncludeObject::Object);
        assert_eq!(whole["rows"][1]["object"], list["items"][1]);
        let empty = json!({"metadata": {"resourceVersion": "7", "continue": ""}, "items": []});
        assert_eq!(
            serde_json::to_string(&render(&empty, IncludeObject::None)["metadata"]).unwrap(),
            r#"{"resourceVersion":"7"}"#
        );
        assert_eq!(render(&empty, IncludeObject::None)["rows"], json!([]));
        let null_items = json!({"metadata": {}, "items": null});
        assert_eq!(
            render(&null_items, IncludeObject::Metadata)["rows"],
            json!([])
        );
        assert_eq!(
            super::table(&columns, b"\"text\"", IncludeObject::None, now),
            Err(Unsupported),
            "not a list"
        );
    }

    /// A row kept from before shows its age at the time of the Table, as
    /// one made at that time would.
    #[test]
    fn kept_rows_write_their_dates_at_the_tables_time() {
        let columns =
            Columns::of(&spec(vec![column("Size", "string", ".spec.size")]), "v1").unwrap();
        let with_age = Columns::of(&spec(vec![]), "v1").unwrap();
        let item = json!({"metadata": {"name": "a", "creationTimestamp": "2027-01-15T07:55:00Z"},
            "spec": {"size": "s"}})
        .to_string();
        let early = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let later = early + std::time::Duration::from_secs(3600);
        for include in [
            IncludeObject::None,
            IncludeObject::Metadata,
            IncludeObject::Object,
        ] {
            for columns in [&columns, &with_age] {
                let row = columns.row_of(&item, include).unwrap();
                let list = json!({"metadata": {"resourceVersion": "3"}, "items": [
                    serde_json::from_str::<Value>(&item).unwrap()]});
                let metadata = list["metadata"].as_object().unwrap().clone();
                for now in [early, later] {
                    assert_eq!(
                        table_of_rows(columns, &metadata, &[&row], now).unwrap(),
                        table(columns, &serde_json::to_vec(&list).unwrap(), include, now).unwrap()
                    );
                }
            }
        }
        let row = with_age.row_of(&item, IncludeObject::None).unwrap();
        let ages: Vec<Value> = [early, later]
            .iter()
            .map(|now| {
                let bytes = table_of_rows(&with_age, &Map::new(), &[&row], *now).unwrap();
                serde_json::from_slice::<Value>(&bytes).unwrap()["rows"][0]["cells"][1].clone()
            })
            .collect();
        assert_eq!(ages, [json!("5m"), json!("65m")]);
        assert_ne!(
            with_age.row_key(IncludeObject::None),
            with_age.row_key(IncludeObject::Metadata)
        );
        assert_ne!(
            with_age.row_key(IncludeObject::None),
            columns.row_key(IncludeObject::None)
        );
    }

    #[test]
    fn a_version_without_printer_columns_shows_age() {
        let columns = Columns::of(&spec(vec![]), "v1").unwrap();
        assert_eq!(columns.definitions[1]["name"], "Age");
        assert_eq!(columns.definitions[1]["type"], "date");
        let object =
            json!({"metadata": {"name": "a", "creationTimestamp": "2027-01-15T07:55:00Z"}});
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        assert_eq!(
            columns.cells(&object, now).unwrap(),
            vec![json!("a"), json!("5m")]
        );
    }

    #[test]
    fn columns_it_cannot_render_exactly_send_the_request_on() {
        assert!(Columns::of(&spec(vec![column("X", "string", ".spec..x")]), "v1").is_err());
        assert!(Columns::of(&spec(vec![]), "v2").is_err(), "no such version");
        let columns =
            Columns::of(&spec(vec![column("M", "string", ".spec.map[*]")]), "v1").unwrap();
        let object = json!({"metadata": {"name": "a"}, "spec": {"map": {"a": 1, "b": 2}}});
        assert_eq!(columns.cells(&object, SystemTime::now()), Err(Unsupported));
    }
}
