//! Label and field selectors from the query string, matched against stored objects.

use serde_json::Value;

use super::object;
use super::status::ApiError;

/// Both selectors of a list, watch or delete-collection request; empty ones match everything.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Equals(String, String),
    /// Also matches objects without the label, as in Kubernetes.
    NotEquals(String, String),
    In(String, Vec<String>),
    /// Also matches objects without the label, as in Kubernetes.
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// `path=value` or `path!=value` on any dotted path of the object (`metadata.name`,
/// `spec.nodeName`); a missing field reads as the empty string.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    path: Vec<String>,
    value: String,
    equal: bool,
}

impl Selector {
    /// Parses `labelSelector` and `fieldSelector`; a malformed one is a 400, as on the real server.
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self, ApiError> {
        let labels = terms(labels.unwrap_or_default())
            .map(parse_label_requirement)
            .collect::<Result<_, _>>()?;
        let fields = terms(fields.unwrap_or_default())
            .map(parse_field_requirement)
            .collect::<Result<_, _>>()?;
        Ok(Self { labels, fields })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.labels.iter().all(|r| r.matches(object))
            && self.fields.iter().all(|r| r.matches(object))
    }
}

impl LabelRequirement {
    fn matches(&self, object: &Value) -> bool {
        match self {
            Self::Equals(key, value) => object::label(object, key) == Some(value),
            Self::NotEquals(key, value) => object::label(object, key) != Some(value),
            Self::In(key, values) => {
                object::label(object, key).is_some_and(|v| values.iter().any(|w| w == v))
            }
            Self::NotIn(key, values) => {
                object::label(object, key).is_none_or(|v| values.iter().all(|w| w != v))
            }
            Self::Exists(key) => object::label(object, key).is_some(),
            Self::NotExists(key) => object::label(object, key).is_none(),
        }
    }
}

impl FieldRequirement {
    fn matches(&self, object: &Value) -> bool {
        let found = self
            .path
            .iter()
            .try_fold(object, |node, step| node.get(step));
        let actual = match found {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        (actual == self.value) == self.equal
    }
}

/// The comma-separated terms of a selector, keeping `in (a,b)` lists whole.
fn terms(selector: &str) -> impl Iterator<Item = &str> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms.into_iter().map(str::trim).filter(|t| !t.is_empty())
}

fn parse_label_requirement(term: &str) -> Result<LabelRequirement, ApiError> {
    let invalid = || {
        ApiError::bad_request(format!(
            "unable to parse requirement: invalid label selector term {term:?}"
        ))
    };
    let key = |k: &str| {
        let k = k.trim();
        let valid = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        if valid {
            Ok(k.to_owned())
        } else {
            Err(invalid())
        }
    };

    if let Some(open) = term.find('(') {
        let inner = term[open + 1..].strip_suffix(')').ok_or_else(invalid)?;
        let values: Vec<String> = inner
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect();
        let head: Vec<&str> = term[..open].split_whitespace().collect();
        return match head.as_slice() {
            [k, "in"] => Ok(LabelRequirement::In(key(k)?, values)),
            [k, "notin"] => Ok(LabelRequirement::NotIn(key(k)?, values)),
            _ => Err(invalid()),
        };
    }
    if let Some(k) = term.strip_prefix('!') {
        return Ok(LabelRequirement::NotExists(key(k)?));
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(LabelRequirement::NotEquals(key(k)?, v.trim().to_owned()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(LabelRequirement::Equals(key(k)?, v.trim().to_owned()));
    }
    Ok(LabelRequirement::Exists(key(term)?))
}

fn parse_field_requirement(term: &str) -> Result<FieldRequirement, ApiError> {
    let (path, value, equal) = if let Some((p, v)) = term.split_once("!=") {
        (p, v, false)
    } else if let Some((p, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        (p, v, true)
    } else {
        return Err(ApiError::bad_request(format!(
            "invalid field selector term {term:?}: expected field=value or field!=value"
        )));
    };
    let path: Vec<String> = path.trim().split('.').map(str::to_owned).collect();
    if path.iter().any(String::is_empty) {
        return Err(ApiError::bad_request(format!(
            "invalid field selector term {term:?}: empty field path"
        )));
    }
    Ok(FieldRequirement {
        path,
        value: value.trim().to_owned(),
        equal,
    })
}
