//! An argument value as a rule file writes it: its type told by how it is
//! written (`7` a whole number, `7.0` a float, `"7"` a string), and the
//! Java type name it may be given as.

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::param_flow::{PARAM_CLASS_TYPES, param_class_kind};

use super::scalar::{Scalar, resolve};
use super::tree::{Node, Value};

/// A value: a string, a number or a boolean, as written.
pub(super) fn read(node: &Node<'_>) -> Result<ParamValue, String> {
    let got = || {
        format!(
            "must be a string, a number or a boolean, got {}",
            node.value.describe()
        )
    };
    let Value::Scalar { text, plain } = &node.value else {
        return Err(got());
    };
    match resolve(text, *plain) {
        Scalar::Str(s) => Ok(ParamValue::from(s)),
        Scalar::Bool(b) => Ok(ParamValue::from(b)),
        Scalar::Int(i) => i64::try_from(i)
            .map(ParamValue::from)
            .or_else(|_| u64::try_from(i).map(ParamValue::from))
            .map_err(|_| format!("must fit in 64 bits, got {i}")),
        Scalar::Float(v) => Ok(ParamValue::from(v)),
        Scalar::Null => Err(got()),
    }
}

/// A value's Java type name: one of the names Sentinel parses.
pub(super) fn class_type(node: &Node<'_>) -> Result<&'static str, String> {
    let names = || {
        PARAM_CLASS_TYPES
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &node.value {
        Value::Scalar { text, .. } => param_class_kind(text)
            .map(|(name, _)| name)
            .ok_or_else(|| format!("must be one of {}, got {text:?}", names())),
        other => Err(format!(
            "must be a Java type name, got {}",
            other.describe()
        )),
    }
}
