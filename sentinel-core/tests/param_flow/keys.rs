//! User key types, limited like the value they convert to.

use std::sync::Arc;

use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};
use sentinel_flow_core::{ParamKey, ParamValue};

use crate::support::instance;
use crate::{admit, arg, enter, hot_rule};

/// A user id, limited as its number.
struct UserId(u64);

impl ParamKey for UserId {
    fn to_param(&self) -> ParamValue {
        ParamValue::from(self.0)
    }
}

/// A product key, limited as a string longer than an inline one.
struct Sku {
    vendor: &'static str,
    id: u32,
}

impl ParamKey for Sku {
    fn to_param(&self) -> ParamValue {
        ParamValue::from(format!("{}/product/{:08}", self.vendor, self.id))
    }
}

#[test]
fn a_user_key_type_is_limited_like_its_value() {
    let (_clock, sentinel) = instance();
    sentinel
        .param_flow_rules()
        .load(vec![ParamFlowRule {
            param_flow_item_list: vec![ParamFlowItem::new(ParamValue::of(&UserId(1)), 4.0)],
            ..ParamFlowRule::new("r", 0, 2.0)
        }])
        .unwrap();

    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&UserId(7))), 5),
        2
    );
    assert_eq!(admit(&sentinel, "r", &arg(7u32), 5), 0, "7 is 7");
    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&UserId(1))), 9),
        4
    );

    // A slice of keys is a list: 7 is spent, 8's token is given back.
    let keys = [UserId(8), UserId(7)];
    let list = arg(ParamValue::of(&keys[..]));
    assert!(hot_rule(&enter(&sentinel, "r", &list).unwrap_err()).count == 2.0);
    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&UserId(8))), 5),
        2
    );
    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&vec![UserId(9)])), 5),
        2
    );

    let sku = Sku {
        vendor: "acme-industries",
        id: 42,
    };
    let value = ParamValue::of(&sku);
    assert!(matches!(value, ParamValue::Str(_)), "{value:?}");
    assert_eq!(admit(&sentinel, "r", &arg(value), 5), 2);
    let same: Arc<str> = format!("{}/product/{:08}", sku.vendor, sku.id).into();
    assert_eq!(admit(&sentinel, "r", &arg(same), 5), 0);
}
