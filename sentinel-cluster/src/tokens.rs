//! The [`ClusterTokens`] service an instance calls: the shared state
//! behind a name of its own, and the same bound to one rule's flow.

use std::sync::Arc;

use sentinel_flow_core::flow::{
    ClusterEndpoint, ClusterFlow, ClusterTokens, ConcurrencyAnswer, TokenAnswer,
};

use sentinel_flow_core::param_flow::{ClusterParamFlow, ParamToken};

use crate::flow::Flow;
use crate::shared::Shared;
use crate::snapshot::ClusterSnapshot;

/// The service an instance calls: `Arc<Shared>` behind a name of its own.
#[derive(Debug, Clone)]
pub(crate) struct Tokens(pub(crate) Arc<Shared>);

impl ClusterTokens for Tokens {
    #[inline]
    fn acquire(&self, rule: &ClusterFlow, permits: u32, now_ms: u64) -> TokenAnswer {
        let shared = &*self.0;
        let flows = shared.flows.load();
        let Some(flow) = flows.get(&rule.flow_id()) else {
            drop(flows);
            let flow = shared.flow(rule);
            return shared.miss(&flow, rule, permits, now_ms);
        };
        shared.decide(flow, rule, permits, now_ms)
    }

    fn acquire_concurrent(&self, rule: &ClusterFlow, permits: u32, _: u64) -> ConcurrencyAnswer {
        let flow = self.0.flow(rule);
        self.0.acquire_concurrent(&flow, rule, permits)
    }

    fn release_concurrent(&self, rule: &ClusterFlow, token: u64) {
        let flow = self.0.flow(rule);
        self.0.release_concurrent(&flow, token);
    }

    fn acquire_param(
        &self,
        rule: &ClusterParamFlow,
        values: &[ParamToken<'_>],
        permits: u32,
        _: u64,
    ) -> TokenAnswer {
        self.0.acquire_param(rule, values, permits)
    }

    fn bind(&self, rule: &ClusterFlow) -> Option<Arc<dyn ClusterTokens>> {
        let flow = self.0.flow(rule);
        Some(Arc::new(FlowTokens {
            shared: self.0.clone(),
            flow,
        }))
    }

    fn render_prometheus(&self, out: &mut String) {
        out.push_str(&ClusterSnapshot::of(&self.0).to_prometheus());
    }

    /// Redis answered lately: not in fallback.
    fn is_available(&self) -> bool {
        self.0.is_up()
    }

    /// The Redis server, the entry budget and the connect timeout.
    fn endpoint(&self) -> Option<ClusterEndpoint> {
        self.0.config.endpoint()
    }
}

/// The service bound to one rule: its flow found once, not per entry.
#[derive(Debug)]
struct FlowTokens {
    shared: Arc<Shared>,
    flow: Arc<Flow>,
}

impl ClusterTokens for FlowTokens {
    #[inline]
    fn acquire(&self, rule: &ClusterFlow, permits: u32, now_ms: u64) -> TokenAnswer {
        self.shared.decide(&self.flow, rule, permits, now_ms)
    }

    fn acquire_concurrent(&self, rule: &ClusterFlow, permits: u32, _: u64) -> ConcurrencyAnswer {
        self.shared.acquire_concurrent(&self.flow, rule, permits)
    }

    fn release_concurrent(&self, _: &ClusterFlow, token: u64) {
        self.shared.release_concurrent(&self.flow, token);
    }
}
