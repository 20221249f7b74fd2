//! The OpenFlow channel's meter messages ([`rqvs_ofproto::meters`] is the table): METER_MOD, the
//! METER and METER_CONFIG multipart requests, and the check of a FLOW_MOD's `meter:N`.

use rqvs_openflow::meter::{self, MeterMod, MP_METER, MP_METER_CONFIG};
use rqvs_openflow::multipart::MultipartReplyBody;
use rqvs_openflow::OfError;

use crate::Control;
use rqvs_ofproto::meters::{check_flow_meters, meters_named, MeterTable, Refusal};
use rqvs_ofproto::record::{FlowFilter, FlowOp};

impl Control {
    /// The switch's meters.
    pub fn meters(&self) -> &MeterTable {
        &self.meters
    }
}

/// A METER_MOD's body: applied to the meter table; a delete also deletes the flows naming
/// the deleted meters (one commit), as OVS does.
pub(crate) fn meter_mod(control: &Control, body: &[u8]) -> Result<(), Refusal> {
    let mm = MeterMod::decode(body).map_err(|e| (e.of_error(), e.to_string()))?;
    let gone = control.meters().apply(&mm)?;
    if gone.is_empty() {
        return Ok(());
    }
    let ops: Vec<FlowOp> = control
        .rules()
        .iter()
        .filter(|r| meters_named(r).any(|m| gone.contains(&m)))
        .map(|r| {
            FlowOp::Delete(FlowFilter {
                matches: Some(r.matches),
                strict: Some(r.priority),
                table: Some(r.table),
                ..FlowFilter::all()
            })
        })
        .collect();
    if !ops.is_empty() {
        control
            .apply_ops(&ops)
            .map_err(|e| (OfError::METER_MOD_FAILED_UNKNOWN, format!("deleting the flows of the meters: {e}")))?;
    }
    Ok(())
}

/// Entries per reply part (a part is one message of at most 64 KiB: a meter's statistics or
/// configuration take at most 40 + 8 × 16 bytes).
const PART: usize = 256;

/// The reply to a METER (statistics) or METER_CONFIG request, in parts; `None` for another
/// multipart type.
pub(crate) fn multipart(control: &Control, kind: u16, body: &[u8]) -> Option<Result<Vec<MultipartReplyBody>, Refusal>> {
    if kind != MP_METER && kind != MP_METER_CONFIG {
        return None;
    }
    let id = match meter::meter_request(body) {
        Ok(id) => id,
        Err(e) => return Some(Err((e.of_error(), e.to_string()))),
    };
    let parts: Vec<Vec<u8>> = if kind == MP_METER {
        let rules = control.rules();
        let stats = control.meters().stats(id, rules.iter());
        stats.chunks(PART).map(meter::encode_meter_stats).collect()
    } else {
        control.meters().configs(id).chunks(PART).map(meter::encode_meter_configs).collect()
    };
    let parts = if parts.is_empty() { vec![Vec::new()] } else { parts };
    Some(Ok(parts.into_iter().map(|body| MultipartReplyBody::Other { kind, body }).collect()))
}

/// A FLOW_MOD's op, refused when an add or modify names a meter that does not exist.
pub(crate) fn check_op(op: Option<FlowOp>, meters: &MeterTable) -> Result<Option<FlowOp>, Refusal> {
    match &op {
        Some(FlowOp::Add(r, _)) => check_flow_meters(&r.actions.0, meters)?,
        Some(FlowOp::Modify(_, actions, _)) => check_flow_meters(&actions.0, meters)?,
        _ => {}
    }
    Ok(op)
}
