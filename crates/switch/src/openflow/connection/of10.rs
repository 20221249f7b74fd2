//! OpenFlow 1.0 connections (plain `ovs-ofctl`, no `-O`): the connection state the Nicira
//! extensions set, and the 1.0 dispatch. Each 1.0 message is decoded by
//! [`rqvs_openflow::of10`] into the 1.3-shaped [`Message`] the version-independent dispatch
//! ([`Connection::dispatch`]) handles, and the replies are written back as 1.0 (Nicira's
//! `NXST_*` replies for Nicira requests). Handled here: FEATURES_REQUEST (1.0's reply carries the
//! ports), `NXT_SET_FLOW_FORMAT`, `NXT_FLOW_MOD_TABLE_ID`, `NXT_SET_PACKET_IN_FORMAT`.
//!
//! 1.0 connections take asynchronous messages as 1.3 ones do (once they set a miss_send_len,
//! as `ovs-ofctl monitor SOCK 65535` does), written in the form the connection's
//! `NXT_SET_PACKET_IN_FORMAT` and `NXT_SET_FLOW_FORMAT` chose ([`rqvs_openflow::of10_async`];
//! kept in the hub's entry for the threads that send them, [`super::super::Peer::of10_form`]);
//! `NXT_SET_ASYNC_CONFIG` is 1.3's SET_ASYNC. PACKET_OUT and PORT_MOD go the 1.3 way.

use rqvs_openflow::message::Features;
use rqvs_openflow::multipart::MultipartReplyBody;
use rqvs_openflow::of10::{self, FlowFormat, ReplyForm, Request};
use rqvs_openflow::{Message, OfError, OFP10};

use super::{Connection, End, N_TABLES};

/// `OFPBRC_EPERM`: what answers a request whose reply 1.0 cannot carry.
pub(super) const BAD_REQUEST_EPERM: OfError = OfError { kind: 1, code: 5 };

/// Why a flow statistics reply cannot be said in 1.0 (a flow's actions have no 1.0 form, as
/// `meter` or a bare `push_vlan`), checked before any part is sent.
pub(super) fn unsayable(parts: &[MultipartReplyBody]) -> Option<String> {
    parts.iter().find_map(|p| match p {
        MultipartReplyBody::Flow(flows) => flows.iter().find_map(|f| {
            let mut w = rqvs_openflow::Writer::new();
            of10::encode_actions(&f.actions, &mut w).err().map(|e| format!("a flow of priority {}: {e}", f.priority))
        }),
        _ => None,
    })
}

/// What a 1.0 connection's Nicira requests set.
#[derive(Debug)]
pub(super) struct State {
    /// `NXT_SET_FLOW_FORMAT` (rqvs answers `NXST_FLOW` in NXM and `OFPST_FLOW` in 1.0's match
    /// whatever it is; FLOW_REMOVED follows it: [`super::super::Peer::of10_form`]).
    pub flow_format: FlowFormat,
    /// `NXT_FLOW_MOD_TABLE_ID`: FLOW_MOD's command carries the table in its high byte.
    pub table_id_ext: bool,
    /// `NXT_SET_PACKET_IN_FORMAT` (the packet-in thread reads it from [`super::super::Peer::of10_form`]).
    pub packet_in_format: u32,
    /// How the reply being written is formed (set per request).
    pub form: ReplyForm,
    /// The request being answered (its first 64 bytes): quoted by the ERROR sent when a reply
    /// cannot be said in 1.0.
    pub request: Vec<u8>,
}

impl Default for State {
    fn default() -> State {
        State {
            flow_format: FlowFormat::OpenFlow10,
            table_id_ext: false,
            packet_in_format: 0,
            form: ReplyForm::default(),
            request: Vec::new(),
        }
    }
}

impl Connection {
    /// Handles one 1.0 message of the negotiated 1.0 connection.
    pub(super) fn handle_of10(&mut self, bytes: &[u8]) -> Result<(), End> {
        let xid = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        if bytes[0] != OFP10 {
            return self.error(OFP10, xid, OfError::BAD_REQUEST_BAD_VERSION, bytes);
        }
        let decoded = match of10::decode(bytes, self.of10.table_id_ext) {
            Ok(d) => d,
            Err(e) => {
                crate::log_debug!("rqvs switch: openflow {}: OpenFlow 1.0 message refused: {e}", self.name);
                return self.error(OFP10, xid, e.of_error(), bytes);
            }
        };
        self.of10.form = ReplyForm { nx_stats: decoded.nx_stats };
        self.of10.request = bytes[..bytes.len().min(64)].to_vec();
        match decoded.request {
            Request::SetFlowFormat(f) => {
                self.of10.flow_format = f;
                self.me.of10_form.lock().unwrap_or_else(|e| e.into_inner()).flow_format = f;
                Ok(())
            }
            Request::FlowModTableId(on) => {
                self.of10.table_id_ext = on;
                Ok(())
            }
            Request::SetPacketInFormat(f) => {
                self.of10.packet_in_format = f;
                self.me.of10_form.lock().unwrap_or_else(|e| e.into_inner()).packet_in_format = f;
                Ok(())
            }
            Request::Msg(m) if matches!(*m, Message::FeaturesRequest) => {
                let features = Features {
                    datapath_id: self.hub.datapath_id.load(std::sync::atomic::Ordering::Relaxed),
                    n_buffers: 0,
                    n_tables: N_TABLES,
                    auxiliary_id: 0,
                    capabilities: of10::CAPABILITIES,
                };
                match of10::encode_features_reply(xid, &features, &self.ports()) {
                    Ok(b) => self.out.send(b).map_err(|_| End::Closed),
                    Err(e) => {
                        crate::log_error!(
                            "rqvs switch: openflow {}: cannot encode a 1.0 features reply: {e} (a bug)",
                            self.name
                        );
                        Err(End::Fatal)
                    }
                }
            }
            Request::FlowMonitor(reqs) => self.flow_monitor(OFP10, xid, reqs, bytes),
            Request::FlowMonitorCancel(id) => self.flow_monitor_cancel(OFP10, xid, id, bytes),
            Request::Msg(m) => self.dispatch(OFP10, xid, OFP10, *m, bytes),
        }
    }

    /// A reply of a 1.0 connection as bytes. What 1.0 cannot say (a flow whose actions have no
    /// 1.0 form, as `meter`) is answered with `BAD_REQUEST`/`EPERM` quoting the request, and
    /// logged with the reason.
    pub(super) fn encode_of10(&mut self, xid: u32, msg: &Message) -> Result<Vec<u8>, End> {
        match of10::encode(xid, msg, self.of10.form) {
            Ok(b) => Ok(b),
            Err(e) => {
                crate::log_warn!(
                    "rqvs switch: openflow {}: a reply cannot be said in OpenFlow 1.0 ({e}): answered with an error",
                    self.name
                );
                let err = Message::Error(rqvs_openflow::message::ErrorMsg::new(BAD_REQUEST_EPERM, &self.of10.request));
                of10::encode(xid, &err, ReplyForm::default()).map_err(|_| End::Fatal)
            }
        }
    }
}
