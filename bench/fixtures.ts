/** The statement parts both benchmarks generate: a multiple-choice question and its result. */

export function questionActivity(id: string, name: string): Record<string, unknown> {
  return {
    objectType: 'Activity',
    id,
    definition: {
      name: { 'en-US': name },
      description: { 'en-US': 'Which of the following is a learning record store?' },
      type: 'http://adlnet.gov/expapi/activities/cmi.interaction',
      interactionType: 'choice',
      correctResponsesPattern: ['lrs'],
      choices: [
        { id: 'lrs', description: { 'en-US': 'An LRS' } },
        { id: 'lms', description: { 'en-US': 'An LMS' } },
      ],
    },
  };
}

export const SCORED_RESULT = { score: { scaled: 0.8, raw: 8, min: 0, max: 10 }, success: true, completion: true, response: 'lrs', duration: 'PT12.5S' };
